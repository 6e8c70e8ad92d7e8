"""Alert channels: list, one, create, update, delete and send a test message (scope `admin`, the admin's
permissions on channels), checked by the admin's form (`alerts.forms.ChannelForm`) and written to the admin's
history under the token's name. The URL and secret are write-only: taken on create and update, stored
encrypted, never answered (only whether each is stored, and the URL's scheme and host)."""

from typing import Any

from django.http import Http404, HttpRequest
from ninja import Query, Router, Status

from dashboard.alerts import workflow
from dashboard.alerts.forms import ChannelForm
from dashboard.alerts.models import Channel
from dashboard.api import administration
from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT
from dashboard.api.problems import refuse_unknown
from dashboard.api.schemas import ChannelIn, ChannelOut, ChannelPage, ChannelTestOut
from dashboard.api.security import allow

router = Router(tags=["channels"])

VIEW = administration.admin_need(Channel, "view")
ADD = administration.admin_need(Channel, "add")
CHANGE = administration.admin_need(Channel, "change")
DELETE = administration.admin_need(Channel, "delete")
# The body's names of the form's write-only fields.
FORM_NAMES = {"url": "new_url", "secret": "new_secret"}
BODY_NAMES = {form: body for body, form in FORM_NAMES.items()}


def _out(channel: Channel) -> dict[str, Any]:
    return {
        "id": channel.pk, "name": channel.name, "kind": channel.kind, "enabled": channel.enabled,
        "url_hint": channel.url_hint, "url_stored": bool(channel.url_encrypted),
        "secret_stored": bool(channel.secret_encrypted), "created_at": channel.created_at,
        "last_attempt_at": channel.last_attempt_at, "last_attempt_ok": channel.last_attempt_ok,
        "last_attempt_result": channel.last_attempt_result,
    }


def _channel(channel_id: int) -> Channel:
    channel = Channel.objects.filter(pk=channel_id).first()
    if channel is None:
        raise Http404("No channel with this id.")
    return channel


def _form(body: ChannelIn, channel: Channel | None) -> ChannelForm:
    given = body.model_dump(exclude_unset=True)
    # Left out (or null), the URL and secret stay as stored, as the admin's empty password fields keep them.
    for name in FORM_NAMES:
        given[name] = given.get(name) or ""
    form = ChannelForm(administration.form_data(ChannelForm, channel, given, FORM_NAMES), instance=channel)
    administration.checked(form, BODY_NAMES)
    return form


@router.get("/channels", response=ChannelPage, summary="Alert channels, by name (no URL or secret)")
def channel_list(
    request: HttpRequest,
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=200, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, ["limit", "cursor"])
    return administration.page_by_name(request, Channel.objects.all(), limit, cursor, _out)


@router.get("/channels/{int:channel_id}", response=ChannelOut, summary="One alert channel (no URL or secret)")
def channel_detail(request: HttpRequest, channel_id: int) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, [])
    return _out(_channel(channel_id))


@router.post("/channels", response=ChannelOut, summary="Create an alert channel")
def channel_create(request: HttpRequest, body: ChannelIn) -> dict[str, Any]:
    caller = allow(request, ADD)
    refuse_unknown(request, [])
    form = _form(body, None)
    return _out(administration.save_added(caller, form))


@router.patch("/channels/{int:channel_id}", response=ChannelOut, summary="Change an alert channel")
def channel_update(request: HttpRequest, channel_id: int, body: ChannelIn) -> dict[str, Any]:
    """Only the fields given change; a URL or secret left out stays as stored."""
    caller = allow(request, CHANGE)
    refuse_unknown(request, [])
    form = _form(body, _channel(channel_id))
    return _out(administration.save_changed(caller, form))


@router.delete("/channels/{int:channel_id}", response={204: None}, summary="Delete an alert channel")
def channel_delete(request: HttpRequest, channel_id: int) -> Status[None]:
    caller = allow(request, DELETE)
    refuse_unknown(request, [])
    administration.delete_logged(caller, _channel(channel_id))
    return Status(204, None)


@router.post("/channels/{int:channel_id}/test", response=ChannelTestOut, summary="Send a test message")
def channel_test(request: HttpRequest, channel_id: int) -> dict[str, Any]:
    """As the admin's action: a test message queued through the outbox; its outcome shows on the channel
    (`last_attempt_*`) a few seconds later."""
    allow(request, CHANGE)
    refuse_unknown(request, [])
    channel = _channel(channel_id)
    message = workflow.send_channel_test(channel)
    return {"message_id": message.pk, "status": message.status, "channel": _out(channel)}
