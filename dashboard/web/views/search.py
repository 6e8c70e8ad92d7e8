"""One box for a tx hash, an address, a topic or a block number, answered from the indexed search keys; a
delivery or stream id, or error text, leads to that delivery or to the filtered list."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from dashboard.accounts.access import viewer_required
from dashboard.deliveries.models import Delivery, EventRollup, Stream
from dashboard.deliveries.schedule import MAX_RETRIES
from dashboard.deliveries.search import HELP, SearchError, event_name, parse_admin_search, search_deliveries
from dashboard.replica import reads_replica
from dashboard.web.forms import SearchForm
from dashboard.web.views.common import bad_filters

RESULTS = 100


def _jump(text: str) -> tuple[str | None, str | None]:
    """Where input that is no payload key leads, read as the admin's search box reads it: a delivery id to
    that delivery, a stream id to its deliveries, words to the failures with that error text. The second
    value is the message for an id that names nothing here."""
    try:
        term = parse_admin_search(text)
    except SearchError:
        return None, None
    if term.kind in ("uuid", "delivery") and Delivery.objects.filter(pk=term.value).exists():
        return reverse("web:delivery", args=[term.value]), None
    if term.kind in ("uuid", "stream") and Stream.objects.filter(stream_id=term.value).exists():
        return f"{reverse('web:deliveries')}?{urlencode({'stream': term.value})}", None
    if term.kind == "error":
        event = _event_named(term.value)
        if event:
            # A bare word that names a decoded event (`Transfer`) is looked for as one: error text holding it
            # is found with the error: prefix, which the page then says.
            return f"{reverse('web:search')}?{urlencode({'q': f'event:{event}', 'word': event})}", None
        return f"{reverse('web:deliveries')}?{urlencode({'status': 'failing', 'error': term.value})}", None
    if term.kind in ("uuid", "delivery", "stream"):
        kind = {"delivery": "delivery", "stream": "stream"}.get(term.kind, "delivery or stream")
        return None, f"No {kind} with this id ({term.value}) is stored here."
    return None, None


def _event_named(text: str) -> str:
    """The text as a decoded event's name when deliveries hold that event (one probe of the event rollup's
    (event, hour) index), else ""."""
    try:
        name = event_name(text)
    except SearchError:
        return ""
    return text.strip() if EventRollup.objects.for_event(name).exists() else ""


@viewer_required
@reads_replica
def search(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    if not form.is_valid():
        target, unknown = _jump(request.GET.get("q", ""))
        if target is not None:
            return redirect(target)
        messages = [unknown] if unknown is not None else None
        return bad_filters(request, form, title="Search", messages=messages, nav="search")
    term = form.cleaned_data["q"]
    results: list[Delivery] = []
    if term is not None:
        found = search_deliveries(Delivery.objects.for_list(), term).deliveries
        results = list(found.newest_first()[: RESULTS + 1])
    context = {
        "nav": "search",
        "term": term,
        "query": request.GET.get("q", ""),
        "deliveries": results[:RESULTS],
        "more": len(results) > RESULTS,
        "help": HELP,
        # The bare word the box was given, when it was read as the event of that name.
        "word": request.GET.get("word", "")[:80] if term is not None and term.kind == "event" else "",
        "max_retries": MAX_RETRIES,
    }
    return render(request, "web/search.html", context)
