"""The deliveries list (filters, keyset pages, CSV export) and one delivery's payload drill-down."""

from __future__ import annotations

import csv
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import orjson
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from dashboard.accounts.access import viewer_required
from dashboard.actions.models import ReplayItem
from dashboard.actions.services import can_act
from dashboard.deliveries.counting import EXACT_LIMIT, bounded_count
from dashboard.deliveries.latency import time_to_delivered_ms
from dashboard.deliveries.models import Delivery, DeliveryChange, ErrorGroup, Stream
from dashboard.deliveries.schedule import MAX_RETRIES, retry_schedule
from dashboard.deliveries.status import DeliveryStatus
from dashboard.replica import reads_replica
from dashboard.sources.clients import page_client
from dashboard.upstream.errors import UpstreamError
from dashboard.upstream.streams import logs_of_block
from dashboard.visibility import carried
from dashboard.web import drilldown
from dashboard.web.attempts import attempt_history, recovery
from dashboard.web.forms import MENU_WINDOW, DeliveryFilterForm, encode_cursor
from dashboard.web.views.common import bad_filters, render_live

PAGE_SIZE = 50
# Deliveries of the other confirmation state shown on a delivery's page (re-sent blocks add more).
PAIR_ROWS = 5
EXPORT_CHUNK = 2000
EXPORT_COLUMNS = (
    "id", "date", "stream_id", "tag", "webhook_url", "chain_id", "confirmed", "block_number", "records",
    "retries", "status", "error_message",
)


@viewer_required
@reads_replica
def delivery_list(request: HttpRequest) -> HttpResponse:
    form = DeliveryFilterForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Deliveries", nav="deliveries")
    data = form.cleaned_data
    newest_first = form.newest_first
    qs = form.filtered(Delivery.objects.for_list())
    after, before = data.get("after"), data.get("before")
    in_order = qs.newest_first() if newest_first else qs.oldest_first()
    if before is not None:
        # The page before a row: walk the other way from it, then put the rows back in display order.
        ordered = qs.oldest_first() if newest_first else qs.newest_first()
        rows = list(ordered.page_after(*before, newest_first=not newest_first)[: PAGE_SIZE + 1])
        has_newer, has_older = len(rows) > PAGE_SIZE, True
        rows = rows[:PAGE_SIZE][::-1]
    else:
        ordered = in_order
        if after is not None:
            ordered = ordered.page_after(*after, newest_first=newest_first)
        rows = list(ordered[: PAGE_SIZE + 1])
        has_newer, has_older = after is not None, len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
    group = ErrorGroup.objects.filter(pk=data["group"]).first() if data.get("group") else None
    context = {
        "nav": "deliveries",
        # The whole filter's match count, as the admin counts: exact up to a bound, estimated beyond (in the
        # page's order, which a probe of a common filter walks).
        "matched": bounded_count(in_order),
        "exact_limit": EXACT_LIMIT,
        "with_next_retry": True,
        # Read only when a row is retrying: the provider stopped retrying the deliveries of these streams.
        "stopped_streams": Stream.objects.statuses_not_active(d.stream_id for d in rows if d.next_retry),
        "form": form,
        "deliveries": rows,
        "group": group,
        "term": data.get("q"),
        "window": data["window"],
        "newer_cursor": encode_cursor(rows[0].date, rows[0].id) if rows and has_newer else None,
        "older_cursor": encode_cursor(rows[-1].date, rows[-1].id) if rows and has_older else None,
        "first_page": after is None and before is None,
        "options": Stream.objects.slice_options(timezone.now() - MENU_WINDOW),
        "max_retries": MAX_RETRIES,
        "can_act": can_act(request.user),
        "filters_query": request.GET.urlencode(),
        "filtered": any(
            data.get(name) not in (None, "") for name in
            ("stream", "tag", "url", "status", "group", "error", "chain", "confirmed", "retries", "q")
        ) or data["window"].preset != "",
    }
    return render_live(request, "web/deliveries.html", "web/_deliveries_partial.html", context)


class _Echo:
    """A file-like object whose write returns the line, so csv.writer feeds a streaming response."""

    def write(self, value: str) -> str:
        return value


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_safe(value: Any) -> Any:
    # Upstream text opened in a spreadsheet must not run as a formula.
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _export_rows(form: DeliveryFilterForm) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(EXPORT_COLUMNS)
    qs = form.filtered(Delivery.objects.all())
    qs = qs.newest_first() if form.newest_first else qs.oldest_first()
    for row in qs.values_list(*EXPORT_COLUMNS).iterator(chunk_size=EXPORT_CHUNK):
        values = list(row)
        values[1] = values[1].isoformat()
        yield writer.writerow([_csv_safe(v) if v is not None else "" for v in values])


@viewer_required
@reads_replica
def delivery_export(request: HttpRequest) -> HttpResponseBase:
    """Exactly the list's filtered set, every page of it, as CSV streamed in chunks."""
    form = DeliveryFilterForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Export deliveries", nav="deliveries")
    response = StreamingHttpResponse(
        # Read after the view has returned: under the viewer's visibility all the same.
        carried(_export_rows(form)), content_type="text/csv; charset=utf-8"
    )
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="deliveries-{stamp}.csv"'
    response["Cache-Control"] = "no-store"
    return response


def _get_delivery(pk: uuid.UUID) -> Delivery:
    delivery = Delivery.objects.select_related("error_group", "source").filter(pk=pk).first()
    if delivery is None:
        raise Http404("No delivery with this id is stored.")
    return delivery


@viewer_required
@reads_replica
def delivery_detail(request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
    delivery = _get_delivery(pk)
    full = request.GET.get("full") == "1"
    payload = delivery.payload if isinstance(delivery.payload, dict) else None
    size = len(orjson.dumps(delivery.payload)) if delivery.payload is not None else 0
    large = size > drilldown.LARGE_PAYLOAD
    tree, tree_cut = drilldown.json_tree(delivery.payload, full=full, large=large) if delivery.payload is not None else ("", False)
    block = payload.get("block") if payload and isinstance(payload.get("block"), dict) else None
    schedule = None
    if delivery.is_failure:
        stopped = Stream.objects.statuses_not_active([delivery.stream_id]) if delivery.next_retry else {}
        schedule = retry_schedule(delivery.date, delivery.retries, stopped.get(delivery.stream_id, ""))
    context = {
        "nav": "deliveries",
        "d": delivery,
        "payload": payload,
        "payload_size": size,
        "large": large,
        "full": full,
        "payload_block": block,
        "block_time": _block_time(block),
        "latency_seconds": _seconds(delivery.latency_ms),
        "delivered_after_seconds": _seconds(time_to_delivered_ms(
            delivery.latency_ms, delivery.retries, delivery.status == DeliveryStatus.DELIVERED
        )),
        "tables": drilldown.tables(payload, delivery.chain_id, full=full) if payload else [],
        "decoded": drilldown.decoded_sections(payload, delivery.chain_id, full=full) if payload else [],
        "abi": drilldown.abi_entries(payload) if payload else [],
        "tree": tree,
        "tree_cut": tree_cut,
        "schedule": schedule,
        "tiny": delivery.tiny_payload if isinstance(delivery.tiny_payload, dict) else {},
        "max_retries": MAX_RETRIES,
        "row_limit": drilldown.TABLE_ROWS,
        "can_act": can_act(request.user),
        **_attempts_context(request, delivery),
        "pair": list(Delivery.objects.for_list().pair_of(delivery)[:PAIR_ROWS]),
        "timeline_url": reverse("web:timeline") + "?" + urlencode(
            {
                "stream": delivery.stream_id,
                "range": "custom",
                "start": (delivery.date - timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%S"),
                "end": (delivery.date + timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%S"),
            }
        ),
    }
    return render(request, "web/delivery_detail.html", context)


def _attempts_context(request: HttpRequest, delivery: Delivery) -> dict[str, Any]:
    return delivery_attempts(delivery, read_logs=request.GET.get("logs") == "1")


def delivery_attempts(delivery: Delivery, *, read_logs: bool) -> dict[str, Any]:
    """The attempt history (the page's and the API's); the provider's logs are read only when asked for
    (`?logs=1`), as they cost requests to the provider."""
    replays = list(ReplayItem.objects.of_delivery(delivery.pk)[:50])
    changes = list(DeliveryChange.objects.filter(delivery_id=delivery.pk).order_by("seen_at")[:100])
    logs = None
    logs_error = ""
    if read_logs and delivery.block_number is not None:
        try:
            logs = logs_of_block(
                page_client(delivery.source, delivery.source.streams_base_url),
                stream_id=delivery.stream_id,
                block_number=delivery.block_number,
                chain=delivery.chain_id or None,
                not_before=delivery.date - timedelta(minutes=1),
            )
        except UpstreamError as exc:
            logs_error = exc.message
    history = attempt_history(delivery, changes=changes, replays=replays, logs=logs)
    return {
        "replays": replays,
        "attempts": history,
        "recovery": recovery(delivery, history),
        "logs_read": logs is not None,
        "logs_error": logs_error,
    }


def _seconds(millis: int | None) -> float | None:
    return None if millis is None else millis / 1000


def _block_time(block: dict[str, Any] | None) -> Any:
    try:
        seconds = int(str((block or {}).get("timestamp")))
        return datetime.fromtimestamp(seconds, tz=UTC) if 0 < seconds < 2**33 else None
    except (TypeError, ValueError):
        return None


@viewer_required
@reads_replica
def delivery_payload(request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
    """The stored payload as JSON, whole: what "see everything" and "copy" read."""
    delivery = _get_delivery(pk)
    body = orjson.dumps(delivery.payload, option=orjson.OPT_INDENT_2)
    response = HttpResponse(body, content_type="application/json")
    if request.GET.get("download") == "1":
        response["Content-Disposition"] = f'attachment; filename="delivery-{delivery.pk}.json"'
    response["Cache-Control"] = "no-store"
    return response
