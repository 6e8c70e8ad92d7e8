"""Deliveries: the list by every filter of the list page (its form, `DeliveryFilterForm`, is the one home of
the filters) in keyset pages, and one delivery with its payload, decoded events and attempt history."""


import uuid
from typing import Any

from django.http import Http404, HttpRequest, QueryDict
from ninja import Field, Query, Router, Schema
from pydantic import create_model

from dashboard.api.pages import DEFAULT_LIMIT, MAX_LIMIT, next_url, on_replica
from dashboard.api.problems import bad_parameters, refuse_unknown
from dashboard.api.schemas import (
    AttemptOut,
    DecodedArg,
    DecodedEvent,
    DeliveryDetail,
    DeliveryOut,
    DeliveryPage,
)
from dashboard.api.security import allow
from dashboard.api.tokens import VIEW
from dashboard.deliveries.decoding import Value, decode_log, read_abi
from dashboard.deliveries.models import Delivery
from dashboard.web.forms import DeliveryFilterForm, encode_cursor
from dashboard.web.views.deliveries import delivery_attempts

router = Router(tags=["deliveries"])

# The list page's own filters, as query parameters; its page positions are the API's `cursor`.
_FORM_FIELDS = [name for name in DeliveryFilterForm.base_fields if name not in ("after", "before")]
DeliveryFilters: type[Schema] = create_model(  # type: ignore[call-overload]
    "DeliveryFilters",
    __base__=Schema,
    **{
        name: (str | None, Field(None, description=str(DeliveryFilterForm.base_fields[name].label or name)))
        for name in _FORM_FIELDS
    },
)
PAGING = ("limit", "cursor")
DECODED_EVENTS = 200


@router.get("/deliveries", response=DeliveryPage, summary="Deliveries by the list page's filters")
@on_replica
def delivery_list(
    request: HttpRequest,
    filters: Query[DeliveryFilters],  # type: ignore[valid-type]
    limit: int = Query(DEFAULT_LIMIT, ge=1, le=MAX_LIMIT),
    cursor: str = Query("", max_length=60, description="`next_cursor` of the previous page"),
) -> dict[str, Any]:
    allow(request, VIEW)
    refuse_unknown(request, [*_FORM_FIELDS, *PAGING])
    data = QueryDict(mutable=True)
    for name in _FORM_FIELDS:
        data.setlist(name, request.GET.getlist(name))
    if cursor:
        data["after"] = cursor
    form = DeliveryFilterForm(data)
    if not form.is_valid():
        raise bad_parameters(form)
    newest_first = form.newest_first
    qs = form.filtered(Delivery.objects.for_list())
    ordered = qs.newest_first() if newest_first else qs.oldest_first()
    after = form.cleaned_data.get("after")
    if after is not None:
        ordered = ordered.page_after(*after, newest_first=newest_first)
    rows = list(ordered[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = encode_cursor(rows[-1].date, rows[-1].id) if rows and more else None
    return {"items": rows, "next_cursor": next_cursor, "next": next_url(request, next_cursor)}


@router.get("/deliveries/{uuid:delivery_id}", response=DeliveryDetail, summary="One delivery")
@on_replica
def delivery_detail(
    request: HttpRequest,
    delivery_id: uuid.UUID,
    logs: bool = Query(False, description="Also read the provider's delivery logs of the block (costs requests "
                       "to the provider), as the delivery page's `logs=1`"),
) -> dict[str, Any]:
    """The stored payload, its events decoded with the payload's own ABI, and the delivery page's attempt
    history (`web.views.deliveries.delivery_attempts`)."""
    allow(request, VIEW)
    refuse_unknown(request, ["logs"])
    delivery = Delivery.objects.select_related("error_group", "source").filter(pk=delivery_id).first()
    if delivery is None:
        raise Http404("No delivery with this id is stored.")
    history = delivery_attempts(delivery, read_logs=logs)
    return {
        **DeliveryOut.from_orm(delivery).dict(),
        "block_time": delivery.block_time,
        "latency_ms": delivery.latency_ms,
        "payload": delivery.payload,
        "decoded_events": decoded_events(delivery.payload),
        "attempts": [AttemptOut.from_orm(a) for a in history["attempts"]],
        "logs_read": history["logs_read"],
        "logs_error": history["logs_error"],
    }


def decoded_events(payload: Any) -> list[DecodedEvent]:
    """The payload's logs decoded with its own ABI (`deliveries.decoding`, as the delivery page does)."""
    if not isinstance(payload, dict) or not payload.get("abi"):
        return []
    abi = read_abi(payload.get("abi"))
    logs = payload.get("logs")
    events = []
    for log in logs[:DECODED_EVENTS] if isinstance(logs, list) else []:
        if not isinstance(log, dict):
            continue
        decoded = decode_log(abi, log)
        events.append(DecodedEvent(
            log_index=log.get("logIndex"),
            transaction_hash=str(log.get("transactionHash") or ""),
            address=str(log.get("address") or ""),
            event=decoded.item.signature if decoded.item is not None else None,
            args=[DecodedArg(name=v.name, type=v.type, value=_plain(v)) for v in decoded.args],
            problem=decoded.problem,
        ))
    return events


def _plain(value: Value) -> Any:
    if value.items:
        return [_plain(item) for item in value.items]
    inner = value.value
    if isinstance(inner, bytes):
        return "0x" + inner.hex()
    if isinstance(inner, int) and not isinstance(inner, bool):
        # uint256 and friends exceed JSON's safe integers.
        return str(inner)
    return inner
