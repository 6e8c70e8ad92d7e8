"""Actions at the provider: prepare a replay of the deliveries list's filters (a draft, with its count and
scope), a stream's reactivation or pause, or the re-send of a block scan's missing blocks; confirm it, follow
its progress, cancel it. Through `actions.services`, with the pages' permission
(`actions.act_at_provider` and PROVIDER_WRITES) and their rules: nothing is sent before the confirmation,
a draft expires after ACTION_CONFIRM_MINUTES, and confirming twice queues the action once."""

from typing import Any

from django.db.models import Q
from django.http import Http404, HttpRequest, QueryDict
from ninja import Query, Router

from dashboard.actions import block_scan, services
from dashboard.actions.models import ActionState, BlockScan, ItemState, ProviderAction, ScanState
from dashboard.actions.tasks import run_action_task
from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, int_cursor, next_url, read_int_cursor
from dashboard.api.problems import Problem, bad_parameters, refuse_unknown
from dashboard.api.schemas import ActionChangeOut, ActionOut, ActionPage, ReplayIn, StatusDraftOut, StatusIn
from dashboard.api.security import allow
from dashboard.api.tokens import ACT_AT_PROVIDER, AUDIT, AUDIT_ACT, Need
from dashboard.deliveries.models import Delivery, Stream
from dashboard.text import visible
from dashboard.web.forms import DeliveryFilterForm
from dashboard.web.views.actions import audit_actions, filter_replay_scope

router = Router(tags=["actions"])

ITEMS_SHOWN = 200
# The list's filters that select deliveries (its page positions and order do not change which).
REPLAY_FILTERS = [name for name in DeliveryFilterForm.base_fields if name not in ("after", "before", "order")]


def _out(action: ProviderAction) -> dict[str, Any]:
    counts = action.items.counts()
    return {
        "id": action.pk, "kind": action.kind, "state": action.state, "scope": action.scope,
        "filters": action.filters, "stream_id": action.stream_id, "requested_by": action.requested_by_name,
        "created_at": action.created_at,
        "confirm_before": action.confirm_deadline() if action.state == ActionState.DRAFT else None,
        "confirmed_at": action.confirmed_at, "started_at": action.started_at, "finished_at": action.finished_at,
        "cancel_requested_at": action.cancel_requested_at, "target_count": action.target_count,
        "done": sum(n for state, n in counts.items() if state not in (ItemState.PENDING, ItemState.SENDING)),
        "counts": counts, "answer": action.answer, "items": list(action.items.all()[:ITEMS_SHOWN]),
    }


def _action(request: HttpRequest, action_id: int, need: Need = AUDIT) -> ProviderAction:
    # Seeing an action is the audit's permission, as on its page.
    allow(request, need)
    action = ProviderAction.objects.filter(pk=action_id).first()
    if action is None:
        raise Http404("No action with this number.")
    return action


@router.post("/actions/replays", response=ActionChangeOut, summary="Prepare a replay of the list's filters")
def replay_prepare(request: HttpRequest, body: ReplayIn) -> dict[str, Any]:
    """A draft: nothing is sent until `confirm`. Refused (400) when the filters match nothing, more than
    REPLAY_MAX_DELIVERIES, or deliveries of several sources."""
    caller = allow(request, ACT_AT_PROVIDER)
    refuse_unknown(request, [])
    unknown = sorted(set(body.filters) - set(REPLAY_FILTERS))
    if unknown:
        names = ", ".join(visible(name)[:60] for name in unknown[:10])
        raise Problem(400, f"Unknown filter: {names}.", kind="unknown-parameter")
    query = QueryDict(mutable=True)
    for name, value in body.filters.items():
        query[name] = value
    form = DeliveryFilterForm(query)
    if not form.is_valid():
        raise bad_parameters(form)
    try:
        action = services.prepare_replay(
            caller.user, form.filtered(Delivery.objects.all()), scope=filter_replay_scope(query),
            filters=query.urlencode(), by=caller.actor,
        )
    except services.ActionRefused as exc:
        raise Problem(400, str(exc), kind="action-refused") from exc
    return {"changed": True, "action": _out(action)}


@router.post("/streams/{stream_id}/status", response=StatusDraftOut,
             summary="Prepare a stream's reactivation or pause at the provider")
def status_prepare(request: HttpRequest, stream_id: str, body: StatusIn) -> dict[str, Any]:
    """A draft, as the stream page prepares it: `action.scope` says in words what the confirmation will do
    (the stream, its status now and the one asked for), `status_read` where that status was read, and
    `action.confirm_before` the deadline of `confirm`. Refused (400) when the stream is already in that status,
    terminated, or the status is neither `active` nor `paused`."""
    caller = allow(request, ACT_AT_PROVIDER)
    refuse_unknown(request, [])
    # Postgres refuses a NUL in a query, and no stream id holds one.
    stream = None if "\x00" in stream_id else (
        Stream.objects.select_related("source").filter(stream_id=stream_id.strip().lower()[:64]).first()
    )
    if stream is None:
        raise Http404("No stream with this id is known here.")
    try:
        action, origin = services.prepare_status_change(caller.user, stream, body.status, by=caller.actor)
    except services.ActionRefused as exc:
        raise Problem(400, str(exc), kind="action-refused") from exc
    return {"changed": True, "action": _out(action), "status_read": origin}


@router.post("/scans/{int:scan_id}/resend", response=ActionChangeOut,
             summary="Prepare the re-send of a block scan's missing blocks")
def resend_prepare(request: HttpRequest, scan_id: int) -> dict[str, Any]:
    """A draft of the window page's re-send: one item per block the finished scan found missing and no other
    re-send asked for already; `action.scope` says which, `action.confirm_before` the deadline of `confirm`.
    Refused (400) while the scan runs, or when no block is left to re-send."""
    caller = allow(request, ACT_AT_PROVIDER)
    refuse_unknown(request, [])
    scan = BlockScan.objects.filter(pk=scan_id).first()
    if scan is None:
        raise Http404("No block scan with this number.")
    if scan.state != ScanState.DONE:
        raise Problem(400, "Wait for the scan to finish: its list is not complete yet.", kind="action-refused")
    missing = block_scan.missing_blocks(scan)
    try:
        action = services.prepare_resend_blocks(
            caller.user, scan, [(m.chain_id, m.block_number) for m in missing], by=caller.actor
        )
    except services.ActionRefused as exc:
        raise Problem(400, str(exc), kind="action-refused") from exc
    return {"changed": True, "action": _out(action)}


@router.get("/actions", response=ActionPage, summary="The audit of actions at the provider, newest first")
def action_list(
    request: HttpRequest,
    stream: str = Query("", max_length=64, description="Only the actions on this stream"),
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=60, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    """The Actions page's list (`web.views.actions.audit_actions`): every action somebody confirmed (drafts are
    intentions, not requests), who asked it, its scope, state and the provider's answer."""
    allow(request, AUDIT)
    refuse_unknown(request, ["stream", "limit", "cursor"])
    actions = audit_actions(stream.strip())
    position = read_int_cursor(cursor)
    if position is not None:
        created, pk = position
        actions = actions.filter(Q(created_at__lt=created) | Q(created_at=created, pk__lt=pk))
    rows = list(actions[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    items = [
        {
            "id": a.pk, "kind": a.kind, "state": a.state, "scope": a.scope, "stream_id": a.stream_id,
            "requested_by": a.requested_by_name, "created_at": a.created_at, "confirmed_at": a.confirmed_at,
            "finished_at": a.finished_at, "target_count": a.target_count, "answer": a.answer,
        }
        for a in rows
    ]
    next_cursor = int_cursor(rows[-1].created_at, rows[-1].pk) if rows and more else None
    return {"items": items, "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


@router.get("/actions/{int:action_id}", response=ActionOut, summary="An action and its progress")
def action_detail(request: HttpRequest, action_id: int) -> dict[str, Any]:
    refuse_unknown(request, [])
    return _out(_action(request, action_id))


@router.post("/actions/{int:action_id}/confirm", response=ActionChangeOut, summary="Confirm a prepared action")
def action_confirm(request: HttpRequest, action_id: int) -> dict[str, Any]:
    """Queues the action once: a repeat answers `changed: false`. A draft past its deadline is refused (400)."""
    allow(request, ACT_AT_PROVIDER)
    refuse_unknown(request, [])
    action = _action(request, action_id, AUDIT_ACT)
    try:
        changed = services.confirm(action, queue=run_action_task.delay)
    except services.ActionRefused as exc:
        raise Problem(400, str(exc), kind="action-refused") from exc
    return {"changed": changed, "action": _out(action)}


@router.post("/actions/{int:action_id}/cancel", response=ActionChangeOut, summary="Cancel an action")
def action_cancel(request: HttpRequest, action_id: int) -> dict[str, Any]:
    """A draft is closed and sends nothing; a running replay stops before its next delivery."""
    allow(request, ACT_AT_PROVIDER)
    refuse_unknown(request, [])
    action = _action(request, action_id, AUDIT_ACT)
    before = action.state, action.cancel_requested_at
    services.cancel(action)
    return {"changed": (action.state, action.cancel_requested_at) != before, "action": _out(action)}
