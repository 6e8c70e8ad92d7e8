"""The actions tests: a simulator with a stream in `error` and failed deliveries stored from it, users of every
role, and Celery tasks run in the test's own process (eagerly) so a confirmation is carried out at once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from dashboard.celery import app as celery_app
from tests.actions.completeness_world import PreviewCounter, World, counting_previews, make_world
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


@pytest.fixture
def world(db: None, make_simulator: Callable[..., Any], no_stale_locks: None) -> World:
    """A simulator whose scenario starts now, polled and synced (the completeness tests)."""
    return make_world(make_simulator)


@pytest.fixture
def previews() -> Iterator[PreviewCounter]:
    """The block previews the simulator serves during the test, counted per block."""
    with counting_previews() as counter:
        yield counter
