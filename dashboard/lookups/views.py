"""Owners by contract and NFTs by creators: a form in the URL, one upstream page, cursor paging.

Both pages run the same flow (`_lookup`); each view states only its form, its upstream call, how a
page of records is shown and its templates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse, QueryDict
from django.views.decorators.http import require_GET

from dashboard.accounts.access import viewer_required
from dashboard.live import render_live
from dashboard.lookups import presenters, services
from dashboard.lookups.forms import DEFAULT_PAGE_SIZE, MAX_CURSOR_STACK, CreatorsForm, LookupForm, OwnersForm
from dashboard.sources.models import Source
from dashboard.upstream import chains, errors
from dashboard.upstream.creators import CreatorsPage
from dashboard.upstream.owners import OwnersPage

F = TypeVar("F", bound=LookupForm)


@dataclass(frozen=True)
class Shown:
    """What a lookup adds to the page for one upstream page of records."""

    context: dict[str, Any]
    next_cursor: str | None
    # The upstream's own page number, when it counts pages; else the link's `page` or the stack's depth.
    page_number: int | None = None


def _lookup(
    request: HttpRequest,
    form_class: type[F],
    *,
    bound_by: str,
    fields: tuple[str, ...],
    initial: dict[str, Any],
    run: Callable[[Source, F], services.Outcome],
    show: Callable[[F, Any], Shown],
    page: str,
    partial: str,
    nav: str,
) -> HttpResponse:
    """Bind the form from the URL, choose the source, ask the upstream for one page, link the pages.

    Invalid input answers 400 with the form marked and nothing sent upstream; an upstream "bad request"
    also answers 400, with its problem shown. The live refresh gets only the results partial.
    """
    bound = bound_by in request.GET
    form = form_class(request.GET if bound else None, initial={"limit": DEFAULT_PAGE_SIZE, **initial})
    context: dict[str, Any] = {"nav": nav, "form": form, "sources": _enabled_sources(), "bound": bound}
    if not bound:
        return render_live(request, page, None, context)
    if not form.is_valid():
        return render_live(request, page, None, context, status=400)
    data = form.cleaned_data
    source = services.choose_source(data["source"])
    context["source"] = source
    context["first_url"] = _first_url(form, fields)
    if source is None:
        context["problem"] = _no_source_problem()
        return render_live(request, page, partial, context)
    outcome = run(source, form)
    context.update(problem=outcome.problem, result=outcome.page, cached=outcome.cached)
    if outcome.page is not None:
        shown = show(form, outcome.page)
        page_number = shown.page_number or data["page"] or len(data["back"]) + 1
        context.update(shown.context)
        context.update(_paging(form, fields, page_number=page_number, next_cursor=shown.next_cursor))
    status = 400 if outcome.problem is not None and outcome.problem.kind == "bad_request" else 200
    return render_live(request, page, partial, context, status=status)


def _query_without_paging(form: LookupForm, fields: tuple[str, ...]) -> QueryDict:
    """The lookup's own parameters as cleaned, in a stable order, for the paging and refresh links."""
    query = QueryDict(mutable=True)
    data = form.cleaned_data
    for name in fields:
        value = data.get(name)
        if value is None or value is False or value == "":
            continue
        if isinstance(value, Source):
            query[name] = str(value.pk)
        elif value is True:
            query[name] = "on"
        elif isinstance(value, list):
            query[name] = "\n".join(value)
        else:
            query[name] = str(value)
    return query


def _paging(
    form: LookupForm, fields: tuple[str, ...], *, page_number: int, next_cursor: str | None
) -> dict[str, Any]:
    """Links to the next, previous and first page; the previous cursors ride along in `back`."""
    base = _query_without_paging(form, fields)
    stack: list[str] = form.cleaned_data["back"]
    current = form.cleaned_data["cursor"]
    links: dict[str, Any] = {
        "page_number": page_number,
        "first_page_url": None,
        "prev_url": None,
        "next_url": None,
    }
    if current:
        links["first_page_url"] = _first_url(form, fields)
    if next_cursor:
        nxt = base.copy()
        nxt["cursor"] = next_cursor
        nxt.setlist("back", ([*stack, current or ""])[-MAX_CURSOR_STACK:])
        nxt["page"] = str(page_number + 1)
        links["next_url"] = "?" + nxt.urlencode()
    if current and stack:
        prev = base.copy()
        if stack[-1]:
            prev["cursor"] = stack[-1]
            prev.setlist("back", stack[:-1])
            prev["page"] = str(max(1, page_number - 1))
        links["prev_url"] = "?" + prev.urlencode()
    return links


def _first_url(form: LookupForm, fields: tuple[str, ...]) -> str:
    return "?" + _query_without_paging(form, fields).urlencode()


def _enabled_sources() -> list[Source]:
    return list(Source.objects.filter(enabled=True).only("pk", "name"))


def _no_source_problem() -> services.Problem:
    return services.Problem(
        "no_source",
        "No upstream source is configured",
        "Set MORALIS_API_KEY (and the MORALIS_* base URLs), or add an enabled source in the admin.",
    )


OWNERS_FIELDS = ("address", "chain", "format", "limit", "normalize_metadata", "media_items", "source")


@viewer_required
@require_GET
def owners(request: HttpRequest) -> HttpResponse:
    return _lookup(
        request,
        OwnersForm,
        bound_by="address",
        fields=OWNERS_FIELDS,
        initial=_owners_initial(request),
        run=_ask_owners,
        show=_show_owners,
        page="lookups/owners.html",
        partial="lookups/_owners_results.html",
        nav="owners",
    )


def _owners_initial(request: HttpRequest) -> dict[str, Any]:
    """A chain already chosen in the link (by name or hex id) is kept in an empty form."""
    try:
        chain = chains.chain_name(request.GET.get("chain") or "eth")
    except errors.InvalidRequest:
        chain = "eth"
    return {"chain": chain, "format": "decimal"}


def _ask_owners(source: Source, form: OwnersForm) -> services.Outcome:
    data = form.cleaned_data
    return services.lookup_owners(
        source,
        address=data["address"],
        chain=form.chain_hex,
        format=data["format"],
        limit=data["limit"],
        cursor=data["cursor"],
        normalize_metadata=data["normalize_metadata"],
        media_items=data["media_items"],
    )


def _show_owners(form: OwnersForm, page: OwnersPage) -> Shown:
    data = form.cleaned_data
    return Shown(
        context={
            "rows": [presenters.owner_row(r, with_media=data["media_items"]) for r in page.records],
            "collection": _collection(page.records),
            "refresh_seconds": services.refresh_seconds(),
            "chain_name": data["chain"],
            "chain_hex": form.chain_hex,
        },
        next_cursor=page.cursor,
        page_number=page.page,
    )


def _collection(records: list[Any]) -> dict[str, Any] | None:
    """The contract's name, symbol, type and verified flag, as the first record carries them."""
    for record in records:
        return {
            "name": record.name,
            "symbol": record.symbol,
            "contract_type": record.contract_type,
            "verified": record.verified_collection,
        }
    return None


CREATORS_FIELDS = ("addresses", "network", "limit", "source")


@viewer_required
@require_GET
def creators(request: HttpRequest) -> HttpResponse:
    return _lookup(
        request,
        CreatorsForm,
        bound_by="addresses",
        fields=CREATORS_FIELDS,
        initial=_creators_initial(request),
        run=_ask_creators,
        show=_show_creators,
        page="lookups/creators.html",
        partial="lookups/_creators_results.html",
        nav="creators",
    )


def _creators_initial(request: HttpRequest) -> dict[str, Any]:
    """A network already chosen in the link is kept in an empty form."""
    network = request.GET.get("network")
    return {"network": network if network in ("mainnet", "testnet") else "mainnet"}


def _ask_creators(source: Source, form: CreatorsForm) -> services.Outcome:
    data = form.cleaned_data
    return services.lookup_creators(
        source,
        addresses=data["addresses"],
        network=data["network"],
        limit=data["limit"],
        cursor=data["cursor"],
    )


def _show_creators(form: CreatorsForm, page: CreatorsPage) -> Shown:
    return Shown(
        context={"groups": presenters.group_by_collection(page.records)},
        next_cursor=page.cursor if page.has_next_page else None,
    )
