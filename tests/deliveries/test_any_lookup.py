"""`field__any=values`: one array literal, the same rows as `__in`, whatever the values hold."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models.functions import MD5

from dashboard.deliveries.models import Delivery, ErrorGroup
from dashboard.deliveries.querysets import array_literal
from dashboard.devtools.generator import generate_deliveries

AWKWARD = ['plain', 'a,b', '{braces}', 'say "hi"', 'back\\slash', 'trailing\\', ' spaced ', '', 'NULL', "it's", None]


@pytest.mark.django_db
def test_an_array_literal_reads_back_as_the_values() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::text[]", [array_literal(AWKWARD)])
        assert cursor.fetchone()[0] == AWKWARD
        cursor.execute("SELECT %s::text[]", [array_literal([])])
        assert cursor.fetchone()[0] == []


@pytest.mark.django_db
def test_any_finds_what_in_finds() -> None:
    generate_deliveries(400, days=3, failure_rate=0.3, analyze=False)
    picked = list(Delivery.objects.order_by("?").values_list("pk", "date")[:40])
    ids = [pk for pk, _date in picked] + [uuid.uuid4()]
    dates = [date for _pk, date in picked] + [datetime(2020, 1, 1, tzinfo=UTC)]

    by_any = Delivery.objects.filter(pk__any=ids, date__any=dates)
    assert sorted(by_any.values_list("pk", flat=True)) == sorted(pk for pk, _date in picked)
    assert "= ANY(" in str(by_any.query) and " IN (" not in str(by_any.query)
    # A date one second off matches nothing: the literal keeps the instant, offset included.
    assert not Delivery.objects.filter(date__any=[d + timedelta(seconds=1) for _pk, d in picked[:5]]).filter(
        pk__any=ids[:5]
    ).exists()
    assert not Delivery.objects.filter(pk__any=[]).exists()

    failing = Delivery.objects.exclude(error_message="")
    digests = list(failing.annotate(digest=MD5("error_message")).values_list("digest", flat=True)[:5])
    by_digest = Delivery.objects.alias(digest=MD5("error_message")).filter(digest__any=digests)
    assert set(by_digest.values_list("pk", flat=True)) == set(
        Delivery.objects.alias(digest=MD5("error_message")).filter(digest__in=digests).values_list("pk", flat=True)
    )
    groups = list(ErrorGroup.objects.values_list("pk", flat=True)[:2])
    assert set(ErrorGroup.objects.filter(pk__any=groups).values_list("pk", flat=True)) == set(groups)


@pytest.mark.django_db
def test_one_value_is_an_equality_an_index_gives_in_order() -> None:
    generate_deliveries(200, days=1, failure_rate=0.5, analyze=False)
    digest = Delivery.objects.exclude(error_message="").annotate(digest=MD5("error_message")).values_list(
        "digest", flat=True
    )[0]
    one = Delivery.objects.alias(digest=MD5("error_message")).filter(digest__any=[digest])
    sql = str(one.query)
    assert "= ANY(" not in sql and f"= {digest}" in sql
    assert one.count() == Delivery.objects.alias(digest=MD5("error_message")).filter(digest=digest).count() > 0
    assert not Delivery.objects.filter(pk__any=[None]).exists() and not Delivery.objects.filter(pk__any=[None, None]).exists()
