"""Admin for deliveries, error groups and upstream sources.

Deliveries and error groups come from upstream and are read-only here. The delivery table grows to
tens of millions of rows, so nothing on its pages counts or sorts the whole table: searches go
through indexes (see `search.search_deliveries`), filter choices come from small tables, and the
paginator counts exactly only up to a bound and estimates beyond it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import orjson
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest
from django.templatetags.static import static
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.functional import cached_property
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from dashboard.accounts.models import Team, TeamMembership
from dashboard.deliveries.counting import EXACT_LIMIT, bounded_count
from dashboard.deliveries.models import Delivery, ErrorGroup, Stream
from dashboard.deliveries.search import ADMIN_HELP, SearchError, parse_admin_search, search_deliveries
from dashboard.deliveries.teams import owned_streams
from dashboard.times import iso
from dashboard.upstream.chains import find_chain

# --- Counting without COUNT(*) -------------------------------------------------------------------------


class EstimatedCountPaginator(Paginator):
    """Counts through `counting.bounded_count` (exact up to `exact_limit` rows, the planner's estimate
    beyond). Pages stop at `max_pages`: deep OFFSETs are slow, and a date filter or a search reaches old
    rows faster."""

    exact_limit = EXACT_LIMIT
    max_pages = 200

    @cached_property
    def count(self) -> int:
        counted = bounded_count(self.object_list, self.exact_limit)  # type: ignore[arg-type]
        self.estimated = counted.estimated
        self.more_than = counted.more_than
        return counted.rows

    @cached_property
    def num_pages(self) -> int:
        return min(super().num_pages, self.max_pages)

    @property
    def capped(self) -> bool:
        return self.count > self.max_pages * self.per_page

    estimated = False
    more_than: int | None = None


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


def chain_label(chain_id: str) -> str:
    chain = find_chain(chain_id)
    return f"{chain.display_name} ({chain_id})" if chain is not None else chain_id


class ChainFilter(admin.SimpleListFilter):
    title = "chain"
    parameter_name = "chain"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        chains: set[str] = set()
        for chain_ids in Stream.objects.values_list("chain_ids", flat=True)[:1000]:
            chains.update(chain_ids or ())
        return [(c, chain_label(c)) for c in sorted(chains)]

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
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Each row's link keeps the list's filters (?_changelist_filters=…), added here once a page: Django's
        # change list merges them into every row's URL after resolving that URL again (~0.1 ms a row).
        self.row_filters, self.preserved_filters = self.preserved_filters, ""

    def url_for_result(self, result: Any) -> str:
        url = super().url_for_result(result)
        return f"{url}?{self.row_filters}" if self.row_filters else url

    def result_rows(self) -> list[SafeString]:
        """The page's rows, each one `<tr>`'s cells exactly as Django's `admin_list.items_for_result` renders
        them for DeliveryAdmin's columns, built here directly: the generic path looks every cell up through the
        field's metadata and formats it through several helpers (~0.2 ms a row, half the time of a search in the
        admin). `tests/admin/test_result_rows.py` compares the two."""
        admin = cast("DeliveryAdmin", self.model_admin)
        empty = admin.get_empty_value_display()
        icons = {value: format_html('<img src="{}" alt="{}">', static(f"admin/img/icon-{name}.svg"), value)
                 for value, name in ((True, "yes"), (False, "no"), (None, "unknown"))}
        labels = dict(Delivery._meta.get_field("status").flatchoices)

        def text(value: str) -> str:
            return escape(value) if value.strip() else empty

        def number(value: int | None) -> str:
            return empty if value is None else escape(formats.number_format(value))

        return [
            mark_safe(  # noqa: S308 - every value below is escaped, or markup built by format_html
                f'<th class="field-when"><a href="{escape(self.url_for_result(d))}">{escape(admin.when(d))}</a></th>'
                f'<td class="field-status">{escape(labels.get(d.status, empty))}</td>'
                f'<td class="field-tag">{text(d.tag)}</td>'
                f'<td class="field-stream">{admin.stream(d)}</td>'
                f'<td class="field-chain_id">{text(d.chain_id)}</td>'
                f'<td class="field-confirmed">{icons[d.confirmed]}</td>'
                f'<td class="field-block_number">{number(d.block_number)}</td>'
                f'<td class="field-retries">{number(d.retries)}</td>'
                f'<td class="field-short_error">{text(admin.short_error(d))}</td>'
                f'<td class="field-dashboard_link">{admin.dashboard_link(d)}</td>'
            )
            for d in self.result_list
        ]

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        # Payloads are most of a row's bytes; the list never shows them.
        return super().get_queryset(request, exclude_parameters).defer("payload", "tiny_payload", "search_keys")

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # Django's changelist shows the whole queryset when the count says it fits on one page (or "show all"
        # fits). An estimated count can be far below the rows that match (a cancelled count of an expensive
        # search, stale statistics): the rows shown are then still only the page's, never all of them.
        if self.paginator.estimated and not isinstance(self.result_list, list):
            limit = self.list_max_show_all if self.show_all and self.can_show_all else self.list_per_page
            if self.result_list.query.high_mark is None:
                self.result_list = self.result_list[:limit]


def pretty_json(value: Any) -> str:
    """Indented JSON inside <pre>, escaped: payload text from upstream is never markup here."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() if value is not None else "null"
    # Styled by dashboard/admin.css (templates/admin/base_site.html): no inline styles under the CSP.
    return format_html('<pre class="payload-json">{}</pre>', text)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("when", "status", "tag", "stream", "chain_id", "confirmed", "block_number", "retries",
                    "short_error", "dashboard_link")
    list_display_links = ("when",)
    # Any date range also works from the URL: ?date__gte=2026-11-01&date__lt=2026-11-02 (the date index).
    list_filter = ("status", StreamFilter, TagFilter, ChainFilter, "confirmed", RecentFilter, "source")
    # No column shows a related row: no join.
    list_select_related = False
    list_per_page = 50
    list_max_show_all = 200
    show_full_result_count = False
    # Facet counts would aggregate the whole table for every filter choice.
    show_facets = admin.ShowFacets.NEVER
    # Sorting by any other column would sort the whole table.
    sortable_by = ("when",)
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

    @admin.display(description="date", ordering="date")
    def when(self, obj: Delivery) -> str:
        # The one format of a moment (times.iso); Django's date format costs ~0.1 ms a row.
        return iso(obj.date)

    @admin.display(description="stream")
    def stream(self, obj: Delivery) -> str:
        return format_html('<span title="{}">{}…</span>', obj.stream_id, obj.stream_id[:8])

    @admin.display(description="error")
    def short_error(self, obj: Delivery) -> str:
        return Truncator(obj.error_message).chars(80)

    @admin.display(description="dashboard")
    def dashboard_link(self, obj: Delivery) -> str:
        return format_html('<a href="{}">open in the dashboard</a>', obj.get_absolute_url())

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


# --- Teams ---------------------------------------------------------------------------------------------


class TeamMembershipInline(admin.TabularInline):  # type: ignore[type-arg]
    model = TeamMembership
    extra = 1
    autocomplete_fields = ("user",)
    readonly_fields = ("from_identity_provider", "created_at")


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Teams and the streams they own (by id, by tag pattern, or as DEFAULT_TEAM every stream nobody claims).
    The admin is for staff, who see every stream; `owns_now` lists what the claims come to."""

    list_display = ("name", "claims", "owns_now", "member_count")
    search_fields = ("name",)
    inlines = [TeamMembershipInline]
    readonly_fields = ("owns_now", "created_at")
    fields = ("name", "stream_ids", "tag_patterns", "alert_emails", "owns_now", "created_at")

    @admin.display(description="claims")
    def claims(self, team: Team) -> str:
        parts = [*team.stream_ids, *(f"tag {p}" for p in team.tag_patterns)]
        if team.name == settings.DEFAULT_TEAM:
            parts.append("every stream no team claims (DEFAULT_TEAM)")
        return ", ".join(parts) or "—"

    @admin.display(description="streams owned now")
    def owns_now(self, team: Team) -> str:
        if team.pk is None:
            return "—"
        rows = owned_streams([team]).get(team.pk, [])
        return ", ".join(sorted(f"{r.tag or '(no tag)'} {r.stream_id}" for r in rows)) or "none"

    @admin.display(description="members")
    def member_count(self, team: Team) -> int:
        return team.memberships.count()
