"""Owners by contract and NFTs by creators: a form in the URL, one upstream page, cursor paging."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.accounts.access import viewer_required
from dashboard.deliveries.models import Source
from dashboard.lookups import presenters, services
from dashboard.lookups.forms import DEFAULT_PAGE_SIZE, MAX_CURSOR_STACK, CreatorsForm, LookupForm, OwnersForm
from dashboard.upstream import chains, errors

# The header the page's refresh script sends to get only the results partial back.
PARTIAL_HEADER = "HTTP_X_LOOKUP_PARTIAL"
PAGING_FIELDS = ("cursor", "back", "page")


def _is_partial(request: HttpRequest) -> bool:
    return request.META.get(PARTIAL_HEADER) == "1"


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


def _render(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    response = render(request, template, context, status=status)
    # Upstream data changes (indexing, new mints); the Redis cache is the only cache wanted.
    response["Cache-Control"] = "private, no-store"
    return response


OWNERS_FIELDS = ("address", "chain", "format", "limit", "normalize_metadata", "media_items", "source")


@viewer_required
@require_GET
def owners(request: HttpRequest) -> HttpResponse:
    bound = "address" in request.GET
    form = OwnersForm(request.GET if bound else None, initial=_initial(request, OwnersForm))
    context: dict[str, Any] = {"nav": "owners", "form": form, "sources": _enabled_sources(), "bound": bound}
    if not bound:
        return _render(request, "lookups/owners.html", context)
    if not form.is_valid():
        return _render(request, "lookups/owners.html", context, status=400)
    data = form.cleaned_data
    source = services.choose_source(data["source"])
    context["source"] = source
    context["first_url"] = _first_url(form, OWNERS_FIELDS)
    if source is None:
        context["problem"] = _no_source_problem()
        return _render(request, "lookups/owners.html", context)
    outcome = services.lookup_owners(
        source,
        address=data["address"],
        chain=form.chain_hex,
        format=data["format"],
        limit=data["limit"],
        cursor=data["cursor"],
        normalize_metadata=data["normalize_metadata"],
        media_items=data["media_items"],
    )
    context.update(problem=outcome.problem, result=outcome.page, cached=outcome.cached)
    if outcome.page is not None:
        page = outcome.page
        page_number = page.page or data["page"] or len(data["back"]) + 1
        context["rows"] = [presenters.owner_row(r, with_media=data["media_items"]) for r in page.records]
        context["collection"] = _collection(page.records)
        context.update(_paging(form, OWNERS_FIELDS, page_number=page_number, next_cursor=page.cursor))
        context["refresh_seconds"] = services.refresh_seconds()
        context["chain_name"] = data["chain"]
        context["chain_hex"] = form.chain_hex
    status = 400 if outcome.problem is not None and outcome.problem.kind == "bad_request" else 200
    template = "lookups/_owners_results.html" if _is_partial(request) else "lookups/owners.html"
    return _render(request, template, context, status=status)


CREATORS_FIELDS = ("addresses", "network", "limit", "source")


@viewer_required
@require_GET
def creators(request: HttpRequest) -> HttpResponse:
    bound = "addresses" in request.GET
    form = CreatorsForm(request.GET if bound else None, initial=_initial(request, CreatorsForm))
    context: dict[str, Any] = {"nav": "creators", "form": form, "sources": _enabled_sources(), "bound": bound}
    if not bound:
        return _render(request, "lookups/creators.html", context)
    if not form.is_valid():
        return _render(request, "lookups/creators.html", context, status=400)
    data = form.cleaned_data
    source = services.choose_source(data["source"])
    context["source"] = source
    context["first_url"] = _first_url(form, CREATORS_FIELDS)
    if source is None:
        context["problem"] = _no_source_problem()
        return _render(request, "lookups/creators.html", context)
    outcome = services.lookup_creators(
        source,
        addresses=data["addresses"],
        network=data["network"],
        limit=data["limit"],
        cursor=data["cursor"],
    )
    context.update(problem=outcome.problem, result=outcome.page, cached=outcome.cached)
    context["base_url"] = services.aptos_base_url(source, data["network"])
    if outcome.page is not None:
        page = outcome.page
        page_number = data["page"] or len(data["back"]) + 1
        context["groups"] = presenters.group_by_collection(page.records)
        context.update(
            _paging(
                form,
                CREATORS_FIELDS,
                page_number=page_number,
                next_cursor=page.cursor if page.has_next_page else None,
            )
        )
    status = 400 if outcome.problem is not None and outcome.problem.kind == "bad_request" else 200
    return _render(request, "lookups/creators.html", context, status=status)


def _initial(request: HttpRequest, form_class: type[LookupForm]) -> dict[str, Any]:
    """Defaults for an empty form; a chain or network already chosen in the link is kept."""
    initial: dict[str, Any] = {"limit": DEFAULT_PAGE_SIZE}
    if form_class is OwnersForm:
        try:
            chain = chains.chain_name(request.GET.get("chain") or "eth")
        except errors.InvalidRequest:
            chain = "eth"
        initial.update(chain=chain, format="decimal")
    else:
        network = request.GET.get("network")
        initial.update(network=network if network in ("mainnet", "testnet") else "mainnet")
    return initial


def _no_source_problem() -> services.Problem:
    return services.Problem(
        "no_source",
        "No upstream source is configured",
        "Set MORALIS_API_KEY (and the MORALIS_* base URLs), or add an enabled source in the admin.",
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
