"""Actions at the provider from the pages: prepare (a DRAFT row and its confirmation page), confirm, cancel, and
the audit of every request made.

Every write is a POST behind CSRF, needs the `act_at_provider` permission and PROVIDER_WRITES; anyone else
gets a 403 with a message, whatever URL they try. Bad input answers 400 with a message.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.accounts.access import viewer_required
from dashboard.actions import services
from dashboard.actions.models import ActionKind, ActionQuerySet, ActionState, ItemState, ProviderAction
from dashboard.actions.tasks import run_action_task
from dashboard.deliveries.models import Delivery, Stream
from dashboard.text import visible
from dashboard.web.forms import DeliveryFilterForm, form_errors
from dashboard.web.views.common import render_live

AUDIT_PAGE = 100
ITEMS_SHOWN = 200
# List filters that select deliveries; page cursors and the order do not change which.
_NOT_FILTERS = ("after", "before", "order")
VIEW_AUDIT = "actions.view_provideraction"


def _require_act(request: HttpRequest) -> None:
    if not services.writes_enabled():
        raise PermissionDenied("Actions at the provider are switched off on this installation (PROVIDER_WRITES).")
    if not services.can_act(request.user):
        raise PermissionDenied("You may not act at the provider: that needs the “replay and change stream status” permission.")


def _refuse(request: HttpRequest, title: str, message: str) -> HttpResponse:
    return render(request, "web/action_refused.html", {"title": title, "errors": [message]}, status=400)


def _get_action(request: HttpRequest, pk: int) -> ProviderAction:
    if not request.user.has_perm(VIEW_AUDIT):
        raise PermissionDenied("Only staff may see actions at the provider.")
    action = ProviderAction.objects.select_related("source").filter(pk=pk).first()
    if action is None:
        raise Http404("No action with this number.")
    return action


def _stream_of(stream_id: str) -> Stream:
    stream = Stream.objects.select_related("source").filter(stream_id=stream_id.strip().lower()).first()
    if stream is None:
        raise Http404("No stream with this id is known here.")
    return stream


def _filters_of(text: str) -> QueryDict:
    query = QueryDict(text[:4000], mutable=True)
    for name in _NOT_FILTERS:
        query.pop(name, None)
    return query


def _describe_filters(query: QueryDict) -> str:
    parts = [f"{name}={visible(value)[:80]}" for name, value in query.items() if value]
    return ", ".join(parts) if parts else "no filter (every stored delivery)"


def filter_replay_scope(query: QueryDict) -> str:
    """The confirmation's sentence for a replay of a list filter (the pages' and the API's)."""
    return (
        f"Replay the deliveries matching {_describe_filters(query)}, "
        f"as the filter read at {timezone.now():%Y-%m-%d %H:%M:%S} UTC"
    )


@viewer_required
@require_POST
def replay_prepare(request: HttpRequest) -> HttpResponse:
    """One delivery (`delivery`) or exactly the deliveries of a list filter (`filters`, the list's query)."""
    _require_act(request)
    title = "Replay deliveries"
    if "delivery" in request.POST:
        try:
            pk = uuid.UUID(request.POST["delivery"].strip())
        except ValueError:
            return _refuse(request, title, "A delivery id is a UUID such as 3fa85f64-5717-4562-b3fc-2c963f66afa6.")
        delivery = Delivery.objects.filter(pk=pk).only("id", "stream_id", "tag", "status", "retries").first()
        if delivery is None:
            return _refuse(request, title, "No delivery with this id is stored.")
        selected = Delivery.objects.filter(pk=pk)
        scope = (
            f"Replay delivery {delivery.pk} of stream {delivery.tag or delivery.stream_id} ({delivery.stream_id}), "
            f"now {delivery.get_status_display().lower()} after {delivery.retries} retries"
        )
        filters = ""
    else:
        query = _filters_of(request.POST.get("filters", ""))
        form = DeliveryFilterForm(query)
        if not form.is_valid():
            return render(request, "web/action_refused.html", {"title": title, "errors": form_errors(form)}, status=400)
        selected = form.filtered(Delivery.objects.all())
        filters = query.urlencode()
        scope = filter_replay_scope(query)
    try:
        action = services.prepare_replay(request.user, selected, scope=scope, filters=filters)
    except services.ActionRefused as exc:
        return _refuse(request, title, str(exc))
    return HttpResponseRedirect(action.get_absolute_url())


@viewer_required
@require_POST
def stream_status_prepare(request: HttpRequest, stream_id: str) -> HttpResponse:
    _require_act(request)
    stream = _stream_of(stream_id)
    wanted = request.POST.get("status", "")
    try:
        action, origin = services.prepare_status_change(request.user, stream, wanted)
    except services.ActionRefused as exc:
        return _refuse(request, "Change stream status", str(exc))
    request.session[f"action-{action.pk}-origin"] = origin
    return HttpResponseRedirect(action.get_absolute_url())


@viewer_required
@require_POST
def resend_block_prepare(request: HttpRequest) -> HttpResponse:
    _require_act(request)
    title = "Re-send a block"
    stream = _stream_of(request.POST.get("stream", ""))
    chain = request.POST.get("chain", "").strip().lower()
    block_text = request.POST.get("block", "").strip()
    if not block_text.isdigit() or len(block_text) > 19:
        return _refuse(request, title, "A block number is a whole number such as 19000000.")
    if chain and chain not in (stream.chain_ids or []) + (stream.provider_chain_ids or []):
        return _refuse(request, title, "This stream does not watch that chain.")
    chain = chain or next(iter(stream.provider_chain_ids or stream.chain_ids or []), "")
    if not chain:
        return _refuse(request, title, "The stream's chain is not known yet; wait for the next stream sync.")
    action = services.prepare_resend_block(request.user, stream, chain, int(block_text))
    return HttpResponseRedirect(action.get_absolute_url())


@viewer_required
@require_POST
def action_confirm(request: HttpRequest, pk: int) -> HttpResponse:
    _require_act(request)
    action = _get_action(request, pk)
    try:
        services.confirm(action, queue=run_action_task.delay)
    except services.ActionRefused as exc:
        return _refuse(request, "Confirm action", str(exc))
    # A double submit lands here too: the second confirm changed nothing and shows the same action.
    return HttpResponseRedirect(action.get_absolute_url())


@viewer_required
@require_POST
def action_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    _require_act(request)
    action = _get_action(request, pk)
    services.cancel(action)
    return HttpResponseRedirect(action.get_absolute_url())


@viewer_required
def action_detail(request: HttpRequest, pk: int) -> HttpResponse:
    action = _get_action(request, pk)
    # Kinds with one item per delivery or block, and their progress.
    items_kind = action.kind in (ActionKind.REPLAY, ActionKind.RESEND_BLOCKS)
    counts = action.items.counts()
    done = sum(n for state, n in counts.items() if state not in (ItemState.PENDING, ItemState.SENDING))
    stream = Stream.objects.filter(stream_id=action.stream_id).first() if action.stream_id else None
    # What the provider says of the streams, before anybody confirms.
    streams = services.streams_acted_on(action) if action.state == ActionState.DRAFT else []
    context: dict[str, Any] = {
        "nav": "actions",
        "action": action,
        "stream": stream,
        "items": list(action.items.all()[:ITEMS_SHOWN]) if items_kind else [],
        "items_kind": items_kind,
        "items_cut": action.target_count > ITEMS_SHOWN,
        "counts": counts,
        # In words: "Answer lost: check and replay by hand if needed" says what a person has to do.
        "count_chips": [(ItemState(state).label, n) for state, n in sorted(counts.items())],
        "done": done,
        "percent": int(100 * done / action.target_count) if action.target_count else 100,
        "can_act": services.can_act(request.user),
        "confirmable": action.can_be_confirmed(),
        "streams": streams,
        "refusal_expected": _refusal_expected(streams),
        "origin": request.session.get(f"action-{action.pk}-origin", ""),
        "live": not action.is_finished and action.state != ActionState.DRAFT,
        "ItemState": ItemState,
    }
    return render_live(request, "web/action.html", "web/_action_partial.html", context)


def _refusal_expected(streams: list[Stream]) -> str:
    """The status for which the provider will refuse the whole request ("terminated" when every stream is, "error"
    when every stream is in error or terminated); "" when some stream may take it. Only a list shorter than
    `STREAMS_SHOWN` is known whole (it names the streams it refuses first)."""
    if not streams or len(streams) >= services.STREAMS_SHOWN or not all(s.failing_at_provider for s in streams):
        return ""
    return "terminated" if all(s.provider_status == "terminated" for s in streams) else "error"


def audit_actions(stream: str = "") -> ActionQuerySet:
    """The audit of actions at the provider, newest first, of one stream or all: the Actions page's list (and the
    API's)."""
    actions = ProviderAction.objects.requested()
    return actions.for_stream(stream) if stream else actions


@viewer_required
def action_list(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm(VIEW_AUDIT):
        raise PermissionDenied("Only staff may see the audit of actions at the provider.")
    stream = request.GET.get("stream", "").strip()[:64]
    actions = audit_actions(stream)
    context = {
        "nav": "actions",
        "actions": list(actions[:AUDIT_PAGE]),
        "stream": stream,
        "writes_enabled": services.writes_enabled(),
        "page_size": AUDIT_PAGE,
    }
    return render(request, "web/actions.html", context)
