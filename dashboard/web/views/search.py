"""One box for a tx hash, an address, a topic or a block number, answered from the indexed search keys."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard.accounts.access import viewer_required
from dashboard.deliveries.models import Delivery
from dashboard.deliveries.schedule import MAX_RETRIES
from dashboard.deliveries.search import HELP
from dashboard.web.forms import SearchForm
from dashboard.web.views.common import bad_filters

RESULTS = 100


@viewer_required
def search(request: HttpRequest) -> HttpResponse:
    form = SearchForm(request.GET)
    if not form.is_valid():
        return bad_filters(request, form, title="Search", nav="search")
    term = form.cleaned_data["q"]
    results: list[Delivery] = []
    if term is not None:
        results = list(Delivery.objects.for_list().matching(term).newest_first()[: RESULTS + 1])
    context = {
        "nav": "search",
        "term": term,
        "query": request.GET.get("q", ""),
        "deliveries": results[:RESULTS],
        "more": len(results) > RESULTS,
        "help": HELP,
        "max_retries": MAX_RETRIES,
    }
    return render(request, "web/search.html", context)
