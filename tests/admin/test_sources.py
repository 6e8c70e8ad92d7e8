"""Sources in the admin: the API key is write-only and never appears in any response; the connection test
reports the upstream's answer in words."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from dashboard.sources.defaults import ensure_default_source
from dashboard.sources.models import Source
from tests.conftest import SIMULATOR_KEY

LIST = "/admin/sources/source/"


def change_url(source: Source) -> str:
    return f"{LIST}{source.pk}/change/"


def form_data(source: Source, **changes: str) -> dict[str, str]:
    data = {
        "name": source.name,
        "new_api_key": "",
        "streams_base_url": source.streams_base_url,
        "evm_base_url": source.evm_base_url,
        "aptos_mainnet_base_url": source.aptos_mainnet_base_url,
        "aptos_testnet_base_url": source.aptos_testnet_base_url,
        "enabled": "on",
    }
    data.update(changes)
    return data


def assert_no_key(response: Any, *keys: str) -> None:
    body = response.content.decode()
    for key in keys:
        assert key not in body
    assert 'name="new_api_key" value' not in body


def test_the_key_is_never_rendered(staff_client: Client, plain_source: Source) -> None:
    key = plain_source.api_key
    for url in (LIST, change_url(plain_source), f"{LIST}{plain_source.pk}/history/", f"{LIST}add/",
                f"{LIST}?q={plain_source.name}"):
        response = staff_client.get(url)
        assert response.status_code == 200, url
        assert_no_key(response, key)
    body = staff_client.get(change_url(plain_source)).content.decode()
    assert 'type="password"' in body
    assert "A key is stored" in body


def test_a_blank_key_keeps_the_stored_one(staff_client: Client, plain_source: Source) -> None:
    response = staff_client.post(change_url(plain_source), form_data(plain_source, name="renamed"), follow=True)
    assert response.status_code == 200
    assert_no_key(response, plain_source.api_key)
    plain_source.refresh_from_db()
    assert plain_source.name == "renamed"
    assert plain_source.api_key == "plain-source-secret-key-0001"


def test_a_new_key_replaces_the_stored_one_and_is_not_logged(staff_client: Client, plain_source: Source) -> None:
    new_key = "brand-new-secret-key-0002"
    response = staff_client.post(change_url(plain_source), form_data(plain_source, new_api_key=new_key), follow=True)
    assert_no_key(response, new_key, "plain-source-secret-key-0001")
    plain_source.refresh_from_db()
    assert plain_source.api_key == new_key
    entry = LogEntry.objects.get(object_id=str(plain_source.pk))
    assert "API key" in entry.get_change_message()
    assert new_key not in entry.change_message
    assert_no_key(staff_client.get(f"{LIST}{plain_source.pk}/history/"), new_key)


def test_a_form_with_errors_does_not_echo_the_typed_key(staff_client: Client, plain_source: Source) -> None:
    typed = "typed-but-rejected-key-0003"
    response = staff_client.post(
        change_url(plain_source), form_data(plain_source, new_api_key=typed, streams_base_url="not a url")
    )
    assert response.status_code == 200
    assert "Enter a valid URL" in response.content.decode()
    assert_no_key(response, typed, plain_source.api_key)
    plain_source.refresh_from_db()
    assert plain_source.api_key == "plain-source-secret-key-0001"


def test_a_new_source_needs_a_key(staff_client: Client, plain_source: Source) -> None:
    data = form_data(plain_source, name="second")
    response = staff_client.post(f"{LIST}add/", data)
    assert response.status_code == 200
    assert "This field is required" in response.content.decode()
    response = staff_client.post(f"{LIST}add/", {**data, "new_api_key": "second-secret-key-0004"}, follow=True)
    assert_no_key(response, "second-secret-key-0004")
    assert Source.objects.get(name="second").api_key == "second-secret-key-0004"


def test_sources_cannot_be_deleted_from_the_admin(staff_client: Client, plain_source: Source) -> None:
    assert staff_client.get(f"{LIST}{plain_source.pk}/delete/").status_code == 403
    assert Source.objects.filter(pk=plain_source.pk).exists()


def run_action(client: Client, *sources: Source) -> str:
    response = client.post(
        LIST,
        {"action": "test_connection_action", "_selected_action": [s.pk for s in sources]},
        follow=True,
    )
    assert response.status_code == 200
    return response.content.decode()


def test_the_connection_test_says_ok(staff_client: Client, source: Source) -> None:
    body = run_action(staff_client, source)
    assert "ok — the upstream accepted the key" in body
    assert SIMULATOR_KEY not in body


def test_the_connection_test_says_the_key_was_rejected(staff_client: Client, source: Source) -> None:
    source.api_key = "wrong-key-that-must-not-show-0005"
    source.save()
    body = run_action(staff_client, source)
    assert "rejected key" in body
    assert source.api_key not in body


def test_the_connection_test_says_unreachable(staff_client: Client, plain_source: Source) -> None:
    body = run_action(staff_client, plain_source)
    assert "unreachable" in body
    assert plain_source.api_key not in body


def test_the_connection_button_on_the_change_page(staff_client: Client, source: Source) -> None:
    url = f"{LIST}{source.pk}/test-connection/"
    assert 'action="' + url in staff_client.get(change_url(source)).content.decode()
    assert staff_client.get(url).status_code == 405
    response = staff_client.post(url, follow=True)
    body = response.content.decode()
    assert response.redirect_chain[-1][0] == change_url(source)
    assert "ok — the upstream accepted the key" in body
    assert SIMULATOR_KEY not in body


@pytest.mark.parametrize("key", ["", "k\u00e9y-with-non-ascii"])
def test_the_connection_test_copes_with_missing_or_unsendable_keys(
    staff_client: Client, plain_source: Source, key: str
) -> None:
    plain_source.api_key = key
    plain_source.save()
    body = run_action(staff_client, plain_source)
    assert ("no API key is stored" if not key else "cannot be sent") in body
    if key:
        assert key not in body


# --- The default source: the environment owns its key and base URLs --------------------------------------

ENV_KEY = "environment-secret-key-0005"
ENV_STREAMS = "https://streams.environment.example"


@pytest.fixture
def environment(settings: Any) -> Any:
    settings.MORALIS_API_KEY = ENV_KEY
    settings.MORALIS_STREAMS_BASE_URL = ENV_STREAMS
    return settings


def test_the_environments_source_shows_its_key_and_urls_read_only_and_says_where_they_are_set(
    staff_client: Client, environment: Any
) -> None:
    source = ensure_default_source()
    assert source is not None

    body = staff_client.get(change_url(source)).content.decode()
    assert 'name="new_api_key"' not in body and 'name="streams_base_url"' not in body
    assert "Set by MORALIS_API_KEY in the environment; change it there and restart." in body
    assert f"{ENV_STREAMS} — Set by MORALIS_STREAMS_BASE_URL in the environment" in body
    assert "at the next start" not in body
    assert_no_key(staff_client.get(change_url(source)), ENV_KEY)

    # Without MORALIS_API_KEY the environment owns nothing, and the source is edited like any other.
    environment.MORALIS_API_KEY = ""
    body = staff_client.get(change_url(source)).content.decode()
    assert 'name="new_api_key"' in body and 'name="streams_base_url"' in body
    assert "Set by MORALIS_API_KEY" not in body


def test_a_key_or_url_posted_for_the_environments_source_is_not_taken(
    staff_client: Client, environment: Any
) -> None:
    source = ensure_default_source()
    assert source is not None
    typed = form_data(source, name="main", new_api_key="typed-in-the-admin-0006",
                      streams_base_url="https://typed.example")
    response = staff_client.post(change_url(source), {**typed, "enabled": ""}, follow=True)
    assert response.status_code == 200

    source.refresh_from_db()
    # What the admin may change is saved; what the environment sets is not, so no poll has to revert it.
    assert source.name == "main" and not source.enabled
    assert source.api_key == ENV_KEY and source.streams_base_url == ENV_STREAMS
    assert ensure_default_source() == source
    source.refresh_from_db()
    assert source.api_key == ENV_KEY and source.name == "main"


def test_a_source_added_in_the_admin_is_never_touched_by_the_environment(
    staff_client: Client, plain_source: Source, environment: Any
) -> None:
    # Even one named like the environment's, added before the environment's could be made.
    data = form_data(plain_source, name="default", new_api_key="admin-typed-key-0007")
    staff_client.post(f"{LIST}add/", data, follow=True)
    added = Source.objects.get(name="default")
    body = staff_client.get(change_url(added)).content.decode()
    assert 'name="new_api_key"' in body and "Set by MORALIS_API_KEY" not in body

    ensure_default_source()
    added.refresh_from_db()
    assert added.api_key == "admin-typed-key-0007" and not added.is_default
    assert added.streams_base_url == plain_source.streams_base_url
    staff_client.post(change_url(added), form_data(added, new_api_key="admin-typed-key-0008"), follow=True)
    ensure_default_source()
    added.refresh_from_db()
    assert added.api_key == "admin-typed-key-0008"
