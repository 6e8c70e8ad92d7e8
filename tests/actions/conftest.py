"""The actions tests: a simulator with a stream in `error` and failed deliveries stored from it, users of every
role, and Celery tasks run in the test's own process (eagerly) so a confirmation is carried out at once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from dashboard.celery import app as celery_app
from tests.conftest import make_user


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    celery_app.conf.task_always_eager = True
    try:
        yield
    finally:
        celery_app.conf.task_always_eager = False


def client_for(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def staff(db: None) -> User:
    return make_user("operator", role="Staff")


@pytest.fixture
def staff_client(staff: User) -> Client:
    return client_for(staff)


@pytest.fixture
def staff_without_permission(db: None) -> User:
    user = make_user("auditor", role="Staff")
    for group in user.groups.all():
        group.permissions.remove(Permission.objects.get(codename="act_at_provider"))
    user = User.objects.get(pk=user.pk)
    return user
