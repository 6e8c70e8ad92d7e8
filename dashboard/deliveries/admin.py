"""Admin for deliveries, error groups and upstream sources.

Deliveries and error groups come from upstream and are read-only here. The delivery table grows to
tens of millions of rows, so nothing on its pages counts or sorts the whole table: searches go
through indexes (see `search.search_deliveries`), filter choices come from small tables, and the
paginator counts exactly only up to a bound and estimates beyond it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import orjson
from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html
from django.utils.text import Truncator

from dashboard.deliveries.models import Delivery, ErrorGroup, Source, Stream
from dashboard.deliveries.search import ADMIN_HELP, SearchError, parse_admin_search, search_deliveries
from dashboard.upstream import errors
from dashboard.upstream.client import ClientSettings, UpstreamClient, scrub_key
from dashboard.upstream.history import fetch_history_page

# --- Counting without COUNT(*) -------------------------------------------------------------------------


class EstimatedCountPaginator(Paginator):
    """Counts exactly up to `exact_limit` rows (a COUNT over a LIMIT subquery, which stops early);
    beyond that takes the planner's estimate. Pages stop at `max_pages`: deep OFFSETs are slow, and a
    date filter or a search reaches old rows faster."""

    exact_limit = 10_000
    max_pages = 200

    @cached_property
    def count(self) -> int:
        queryset: QuerySet[Any] = self.object_list.order_by()  # type: ignore[attr-defined]
        bounded = queryset[: self.exact_limit + 1].count()
        self.estimated = bounded > self.exact_limit
        if not self.estimated:
            return bounded
        return max(bounded, planner_estimate(queryset))

    @cached_property
    def num_pages(self) -> int:
        return min(super().num_pages, self.max_pages)

    @property
    def capped(self) -> bool:
        return self.count > self.max_pages * self.per_page

    estimated = False


def planner_estimate(queryset: QuerySet[Any]) -> int:
    """The row count Postgres expects for the query, from its statistics; reads no rows."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str | bytes):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


# --- Delivery list filters whose choices come from small tables ------------------------------------------


class StreamFilter(admin.SimpleListFilter):
    title = "stream"
    parameter_name = "stream"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        seen: dict[str, str] = {}
        for stream_id, tag in Stream.objects.order_by("tag", "stream_id").values_list("stream_id", "tag")[:200]:
            seen.setdefault(stream_id, f"{tag or '(no tag)'} · {stream_id[:8]}")
        return list(seen.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(stream_id=self.value()) if self.value() else queryset


class TagFilter(admin.SimpleListFilter):
    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        tags = Stream.objects.exclude(tag="").order_by("tag").values_list("tag", flat=True).distinct()[:200]
        return [(tag, tag) for tag in tags]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(tag=self.value()) if self.value() else queryset


KNOWN_CHAINS = {
    "0x1": "Ethereum",
    "0x5": "Goerli",
    "0xaa36a7": "Sepolia",
    "0x89": "Polygon",
    "0x13881": "Mumbai",
    "0x38": "BNB Chain",
    "0x61": "BNB testnet",
    "0xa86a": "Avalanche",
    "0xfa": "Fantom",
    "0x2a15c308d": "Palm",
    "0x19": "Cronos",
    "0xa4b1": "Arbitrum",
}


class ChainFilter(admin.SimpleListFilter):
    title = "chain"
    parameter_name = "chain"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        chains: set[str] = set()
        for chain_ids in Stream.objects.values_list("chain_ids", flat=True)[:1000]:
            chains.update(chain_ids or ())
        return [(c, f"{KNOWN_CHAINS[c]} ({c})" if c in KNOWN_CHAINS else c) for c in sorted(chains)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(chain_id=self.value()) if self.value() else queryset


class RecentFilter(admin.SimpleListFilter):
    """Date windows ending now; each is a range on the date index."""

    title = "date"
    parameter_name = "since"
    windows = {"1h": ("Last hour", timedelta(hours=1)), "24h": ("Last 24 hours", timedelta(days=1)),
               "7d": ("Last 7 days", timedelta(days=7)), "30d": ("Last 30 days", timedelta(days=30))}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(key, label) for key, (label, _) in self.windows.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        window = self.windows.get(self.value() or "")
        return queryset.filter(date__gte=timezone.now() - window[1]) if window else queryset


# --- Deliveries -------------------------------------------------------------------------------------------


class DeliveryChangeList(ChangeList):
    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        # Payloads are most of a row's bytes; the list never shows them.
        return super().get_queryset(request, exclude_parameters).defer("payload", "tiny_payload", "search_keys")


def dashboard_url(delivery: Delivery) -> str:
    try:
        return reverse("web:delivery", args=[delivery.pk])
    except NoReverseMatch:
        return f"/deliveries/{delivery.pk}/"


def pretty_json(value: Any) -> str:
    """Indented JSON inside <pre>, escaped: payload text from upstream is never markup here."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() if value is not None else "null"
    return format_html('<pre class="payload-json" style="white-space: pre-wrap; max-height: 60em; '
                       'overflow: auto">{}</pre>', text)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("date", "status", "tag", "stream", "chain_id", "confirmed", "block_number", "retries",
                    "short_error", "dashboard_link")
    list_display_links = ("date",)
    # Any date range also works from the URL: ?date__gte=2026-11-01&date__lt=2026-11-02 (the date index).
    list_filter = ("status", StreamFilter, TagFilter, ChainFilter, "confirmed", RecentFilter, "source")
    list_select_related = ("source", "error_group")
    list_per_page = 50
    list_max_show_all = 200
    show_full_result_count = False
    # Facet counts would aggregate the whole table for every filter choice.
    show_facets = admin.ShowFacets.NEVER
    # Sorting by any other column would sort the whole table.
    sortable_by = ("date",)
    ordering = ("-date", "-id")
    paginator = EstimatedCountPaginator
    # Only makes the search box appear: get_search_results does the searching, through indexes.
    search_fields = ("search_keys",)
    search_help_text = ADMIN_HELP
    actions = None
    fieldsets = (
        (None, {"fields": ("id", "dashboard_link", "source", "date", "status", "stream_id", "tag", "webhook_url",
                           "chain_id", "confirmed", "block_number", "records", "retries")}),
        ("Error", {"fields": ("error_message", "error_group_link")}),
        ("Payload", {"fields": ("tiny_payload_json", "payload_json", "search_keys_list")}),
        ("Bookkeeping", {"fields": ("record_hash", "first_seen_at", "updated_at")}),
    )
    readonly_fields = (
        "id", "dashboard_link", "source", "date", "status", "stream_id", "tag", "webhook_url", "chain_id",
        "confirmed", "block_number", "records", "retries", "error_message", "error_group_link",
        "tiny_payload_json", "payload_json", "search_keys_list", "record_hash", "first_seen_at", "updated_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return DeliveryChangeList

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest) -> bool:
        # Links from the error groups list filter by group.
        if lookup in ("error_group", "error_group__id__exact", "error_group__exact"):
            return True
        return super().lookup_allowed(lookup, value, request)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        if not search_term.strip():
            return queryset, False
        try:
            outcome = search_deliveries(queryset, parse_admin_search(search_term))  # type: ignore[arg-type]
        except SearchError as exc:
            messages.warning(request, str(exc))
            return queryset.none(), False
        messages.info(request, outcome.note)
        return outcome.deliveries, False

    @admin.display(description="stream")
    def stream(self, obj: Delivery) -> str:
        return format_html('<span title="{}">{}…</span>', obj.stream_id, obj.stream_id[:8])

    @admin.display(description="error")
    def short_error(self, obj: Delivery) -> str:
        return Truncator(obj.error_message).chars(80)

    @admin.display(description="dashboard")
    def dashboard_link(self, obj: Delivery) -> str:
        return format_html('<a href="{}">open in the dashboard</a>', dashboard_url(obj))

    @admin.display(description="error group")
    def error_group_link(self, obj: Delivery) -> str:
        if obj.error_group is None:
            return "—"
        url = reverse("admin:deliveries_delivery_changelist") + f"?error_group__id__exact={obj.error_group_id}"
        return format_html('<a href="{}">{}</a>', url, obj.error_group.template)

    @admin.display(description="tiny payload")
    def tiny_payload_json(self, obj: Delivery) -> str:
        return pretty_json(obj.tiny_payload)

    @admin.display(description="payload")
    def payload_json(self, obj: Delivery) -> str:
        return pretty_json(obj.payload)

    @admin.display(description="search keys")
    def search_keys_list(self, obj: Delivery) -> str:
        return pretty_json(obj.search_keys)


# --- Error groups -----------------------------------------------------------------------------------------


@admin.register(ErrorGroup)
class ErrorGroupAdmin(admin.ModelAdmin):
    list_display = ("template", "delivery_count", "first_seen", "last_seen", "deliveries_link")
    # One row per distinct masked message: a small table, so a plain substring search is fine here.
    search_fields = ("template",)
    ordering = ("-last_seen",)
    readonly_fields = ("template", "fingerprint", "delivery_count", "first_seen", "last_seen", "deliveries_link")
    fields = readonly_fields
    actions = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="deliveries")
    def deliveries_link(self, obj: ErrorGroup) -> str:
        url = reverse("admin:deliveries_delivery_changelist") + f"?error_group__id__exact={obj.pk}"
        return format_html('<a href="{}">show deliveries</a>', url)


# --- Sources ----------------------------------------------------------------------------------------------


class SourceForm(forms.ModelForm):
    """The API key is write-only: typed into a password field, never rendered back, not even masked."""

    new_api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        max_length=512,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )

    # Declared to pick https for addresses typed without a scheme.
    streams_base_url = forms.URLField(max_length=300, assume_scheme="https")
    evm_base_url = forms.URLField(max_length=300, assume_scheme="https")
    aptos_mainnet_base_url = forms.URLField(max_length=300, assume_scheme="https")
    aptos_testnet_base_url = forms.URLField(max_length=300, assume_scheme="https")

    class Meta:
        model = Source
        fields = ("name", "streams_base_url", "evm_base_url", "aptos_mainnet_base_url", "aptos_testnet_base_url",
                  "enabled")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["new_api_key"]
        if self.instance.pk and self.instance.api_key:
            field.help_text = "A key is stored. Leave this empty to keep it; type a new key to replace it."
        elif self.instance.pk:
            field.help_text = "No key is stored: the poller cannot read this source until one is entered."
        else:
            field.required = True
        if self.instance.is_default:
            field.help_text += (
                " This source is made from the MORALIS_* environment variables, which win at the next start."
            )

    def save(self, commit: bool = True) -> Source:
        source: Source = super().save(commit=False)
        new_key = self.cleaned_data.get("new_api_key")
        if new_key and new_key != source.api_key:
            source.api_key = new_key
            # A new key deserves a fresh try at once.
            source.key_rejected_at = None
            source.backoff_until = None
        if commit:
            source.save()
        return source


def test_connection(source: Source) -> tuple[int, str]:
    """Ask the streams host for one history record; return a message level and the answer in words."""
    if not source.api_key:
        return messages.WARNING, f"{source.name}: no API key is stored, nothing was sent."
    settings = ClientSettings(api_key=source.api_key, connect_timeout=5, read_timeout=10, max_retries=0,
                              total_timeout=20)
    try:
        with UpstreamClient(source.streams_base_url, settings) as client:
            page = fetch_history_page(client, limit=1)
    except errors.RejectedKey as exc:
        level, text = messages.ERROR, f"rejected key — the upstream refused the API key ({exc.message})"
    except errors.Unreachable as exc:
        level, text = messages.ERROR, f"unreachable — {exc.message}"
    except errors.RateLimited as exc:
        level, text = messages.WARNING, f"rate limited — the key was accepted but calls are throttled ({exc.message})"
    except errors.InvalidRequest as exc:
        level, text = messages.ERROR, f"not sent — {exc.message}"
    except errors.UpstreamError as exc:
        level, text = messages.ERROR, f"upstream error — {exc.message}"
    else:
        total = f"{page.total:,} deliveries in its history" if page.total is not None else "its history"
        level, text = messages.SUCCESS, f"ok — the upstream accepted the key and answered with {total}"
    # The transport scrubs the key from its texts; an upstream echoing it back is scrubbed here too.
    text = scrub_key(text, source.api_key, "[key]")
    return level, f"{source.name} ({source.streams_base_url}): {text}."


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    form = SourceForm
    change_form_template = "admin/deliveries/source/change_form.html"
    list_display = ("name", "enabled", "is_default", "streams_base_url", "last_success_at", "last_error_kind",
                    "consecutive_failures")
    list_filter = ("enabled",)
    search_fields = ("name",)
    actions = ("test_connection_action",)
    readonly_fields = (
        "is_default", "created_at", "last_poll_started_at", "last_success_at", "last_error_at", "last_error_kind",
        "last_error_message", "consecutive_failures", "key_rejected_at", "backoff_until", "newest_upstream_date",
        "synced_through", "records_last_poll", "last_revisit_at",
    )
    fieldsets = (
        (None, {"fields": ("name", "new_api_key", "enabled", "is_default")}),
        ("Base URLs", {"fields": ("streams_base_url", "evm_base_url", "aptos_mainnet_base_url",
                                  "aptos_testnet_base_url")}),
        ("Sync state (written by the poller)", {"fields": readonly_fields[1:]}),
    )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting a source deletes its whole delivery history (and the confirmation page would list it);
        # switch it off with "enabled" instead.
        return False

    @admin.action(description="Test connection to the upstream", permissions=["change"])
    def test_connection_action(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        for source in queryset[:20]:
            level, text = test_connection(source)
            self.message_user(request, text, level)

    def get_urls(self) -> list[Any]:
        test = self.admin_site.admin_view(self.test_connection_view)
        return [path("<int:pk>/test-connection/", test, name="deliveries_source_test_connection"),
                *super().get_urls()]

    def test_connection_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        source = get_object_or_404(Source, pk=pk)
        if not self.has_change_permission(request, source):
            raise PermissionDenied
        level, text = test_connection(source)
        self.message_user(request, text, level)
        return HttpResponseRedirect(reverse("admin:deliveries_source_change", args=[source.pk]))
