"""Template helpers: query strings that keep the current filters, numbers, explorer links."""

from __future__ import annotations

import html
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django import template
from django.http import QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from dashboard.deliveries import payload_keys
from dashboard.deliveries.schedule import retries_stopped
from dashboard.text import visible
from dashboard.times import iso
from dashboard.web import explorers

register = template.Library()

# Page position never carries over to a link that changes what is shown.
_PAGING = ("after", "before")


@register.simple_tag(takes_context=True)
def qs(context: dict[str, Any], **changes: Any) -> str:
    """The current query string with `changes` applied (None or "" removes a key), starting with "?"."""
    request = context.get("request")
    params: QueryDict = request.GET.copy() if request is not None else QueryDict(mutable=True)
    for key in _PAGING:
        if key not in changes:
            params.pop(key, None)
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = str(value)
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.simple_tag
def query(**params: Any) -> str:
    """A fresh query string from the given non-empty parameters."""
    clean = {k: v for k, v in params.items() if v is not None and v != ""}
    return f"?{urlencode(clean)}" if clean else ""


@register.filter
def item(mapping: Any, key: Any) -> Any:
    """`mapping[key]`, or None: a dict lookup by a variable key."""
    return mapping.get(key) if mapping else None


@register.filter
def jsonish(value: Any) -> str:
    """A scalar as JSON spells it: null, true, false, numbers and strings as they are."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value, ensure_ascii=False)[:2000]
    return str(value)


@register.filter
def pct(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    if value >= 99.95 and value < 100:
        return "99.9%"
    return f"{value:.{digits}f}%" if value != 100 else "100%"


@register.filter
def rate(part: int | None, whole: int | None) -> float | None:
    if not whole:
        return None
    return 100.0 * (part or 0) / whole


@register.filter
def number(value: int | None) -> str:
    """A count with thousands separators, as every count on the pages is written: 12,345; "—" when unknown."""
    if value is None or value == "":
        return "—"
    return f"{int(value):,}"


@register.filter
def compact(value: int | None) -> str:
    if value is None:
        return "—"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1000:.1f}k"
    return f"{value:,}"


@register.filter
def ago(value: datetime | None) -> str:
    """"3 min ago", "2 h ago", "5 d ago"; "in 4 h" for the future."""
    if value is None:
        return "never"
    delta = timezone.now() - value
    future = delta < timedelta(0)
    seconds = abs(int(delta.total_seconds()))
    if seconds < 60:
        text = f"{seconds} s"
    elif seconds < 3600:
        text = f"{seconds // 60} min"
    elif seconds < 86400 * 2:
        text = f"{seconds // 3600} h {seconds % 3600 // 60} min" if seconds < 36000 else f"{seconds // 3600} h"
    else:
        text = f"{seconds // 86400} d"
    return f"in {text}" if future else f"{text} ago"


@register.filter
def event_label(name: str) -> str:
    """A decoded event's name as its contract spells it (stored in lower case): `transfer` as `Transfer`."""
    return payload_keys.event_label(str(name or ""))


@register.filter
def next_attempt(value: datetime | None) -> str:
    """When the provider tries again: "in 4 min", or "due 7 min ago" when the attempt time has passed and
    its result has not been polled yet (the retry-window revisit brings it)."""
    if value is None:
        return "none left"
    return ago(value) if value > timezone.now() else f"due {ago(value)}"


@register.filter
def duration(seconds: float | int | None) -> str:
    if seconds is None:
        return "—"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60} min" if rest // 60 else f"{hours} h"


@register.filter
def chain_name(chain_id: str | None) -> str:
    return explorers.chain_name(chain_id)


@register.simple_tag
def explorer(chain_id: str | None, kind: str, value: Any) -> str:
    return explorers.explorer_url(chain_id, kind, value) or ""


@register.filter
def short_id(value: str | None, keep: int = 8) -> str:
    if not value:
        return ""
    text = str(value)
    return text if len(text) <= keep + 1 else f"{text[:keep]}…"


@register.filter
def short_hash(value: str | None) -> str:
    if not value:
        return ""
    text = str(value)
    return text if len(text) <= 14 else f"{text[:8]}…{text[-4:]}"


@register.filter
def host(url: str | None) -> str:
    from urllib.parse import urlsplit

    if not url:
        return ""
    try:
        return urlsplit(url).netloc or url
    except ValueError:
        return url


_ANY_ID = uuid.UUID(int=0)
_TEST_WEBHOOK = (
    '<span class="pill pill-muted" title="The provider\'s test webhook, sent after the stream was created, updated or '
    'reactivated: no chain event, kept out of rates and alerts">test webhook</span>'
)
_CONFIRMED = {None: '<span class="faint">—</span>', True: '<span class="pill pill-muted">confirmed</span>',
              False: '<span class="faint">unconfirmed</span>'}


@register.simple_tag
def delivery_rows(
    deliveries: Any, *, max_retries: int, with_next_retry: bool = False, stopped: dict[str, str] | None = None
) -> SafeString:
    """The `<tr>` of each delivery for the deliveries table (`web/_delivery_rows.html`: the list, its live refresh
    and the search page), built in one pass: the same markup as a template loop, which spends ~0.2 ms a row
    resolving a dozen variables and filters (half of a search's time). Every upstream value is escaped (as
    Django's `escape` does, without its lazy-string wrapper), and the tag, URL and error text go through
    `visible`. `stopped` holds the provider's status of the streams it does not have active: their deliveries
    show that retries stopped instead of a next retry."""
    href_of = _delivery_href()
    rows = []
    for d in deliveries:
        href = href_of(d.pk)
        tag = _escape(visible(d.tag))
        url = _escape(visible(d.webhook_url))
        error = Truncator(visible(d.error_message))
        cells = [
            f'<tr class="clickable" data-href="{href}">',
            f'<td><span class="status status-{_escape(d.status)}">{_escape(d.get_status_display())}</span></td>',
            f'<td class="nowrap"><a href="{href}" class="mono">{_escape(iso(d.date))}</a></td>',
            '<td class="nowrap stream-cell">'
            + (f'<span class="tag" title="{tag}">{tag}</span>' if d.tag else '<span class="faint">no tag</span>')
            + f' <span class="mono faint" title="{_escape(d.stream_id)}">{_escape(short_id(d.stream_id))}</span></td>',
            f'<td class="mono ellipsis maxw-240 col-wide" title="{url}">{url}</td>',
            f'<td class="nowrap">{_TEST_WEBHOOK if d.is_test else _escape(chain_name(d.chain_id))}</td>',
            f'<td class="num mono">{"—" if d.block_number is None else _escape(d.block_number)}</td>',
            f'<td class="col-wide">{_CONFIRMED[d.confirmed]}</td>',
            '<td class="num">' + (
                f'<span class="{"bad" if d.retries >= max_retries else "warn"}">{_escape(d.retries)}</span>'
                if d.retries else '<span class="faint">0</span>'
            ) + '</td>',
        ]
        if with_next_retry:
            when = d.next_retry
            status = (stopped or {}).get(d.stream_id, "") if when else ""
            cells.append(
                # The words of stopped retries wrap: the column stays as narrow as a date.
                (f'<td class="next-retry"><span class="warn retries-stopped">{_escape(retries_stopped(status))}</span>' if status else
                 '<td class="nowrap next-retry">' + (
                    f'<span class="mono">{_month_day_time(when)}</span>'
                    f'<span class="faint block">{_escape(next_attempt(when))}</span>'
                    if when else '<span class="faint">—</span>'
                 )) + '</td>'
            )
        cells.append(
            f'<td class="error-text fill" title="{_escape(error.chars(1000))}">'
            f'<span class="clamp">{_escape(error.chars(160))}</span></td></tr>'
        )
        rows.append("".join(cells))
    return mark_safe("\n".join(rows))  # noqa: S308 - every value above is escaped


@register.simple_tag
def still_failing_rows(deliveries: Any) -> SafeString:
    """The `<tr>` of each delivery the provider is still retrying (the Retries page's "Still failing": up to 100),
    with its place on the retry schedule (`d.schedule`, `schedule.retry_schedule`), built in one pass as
    `delivery_rows` is: the template loop's markup, every upstream value escaped and shown `visible`."""
    href_of = _delivery_href()
    rows = []
    for d in deliveries:
        href = href_of(d.pk)
        url = _escape(visible(d.webhook_url))
        error = Truncator(visible(d.error_message))
        schedule = d.schedule
        if schedule.stopped:
            next_cell = f'<td><span class="warn retries-stopped">{_escape(schedule.stopped)}</span></td>'
        elif schedule.next_retry:
            next_cell = (
                f'<td class="nowrap">{_month_day_time(schedule.next_retry)} <span class="faint" title="an attempt whose '
                'time has passed shows its result once the retry window is polled again">'
                f"({_escape(next_attempt(schedule.next_retry))})</span></td>"
            )
        else:
            next_cell = '<td class="nowrap">—</td>'
        rows.append("".join((
            f'<tr class="clickable" data-href="{href}">',
            f'<td class="nowrap"><a class="mono" href="{href}">{_escape(iso(d.date))}</a></td>',
            '<td class="nowrap">' + (f'<span class="tag">{_escape(visible(d.tag))}</span>' if d.tag else "")
            + f' <span class="mono faint">{_escape(short_id(d.stream_id))}</span></td>',
            f'<td class="mono ellipsis maxw-260" title="{url}">{url}</td>',
            f'<td class="num warn">{_escape(d.retries)}</td>',
            f'<td class="error-text fill" title="{_escape(error.chars(1000))}">{_escape(error.chars(160))}</td>',
            next_cell,
            f'<td class="nowrap">{_month_day_time(schedule.runs_out)} <span class="faint">({_escape(ago(schedule.runs_out))})'
            "</span></td></tr>",
        )))
    return mark_safe("\n".join(rows))  # noqa: S308 - every value above is escaped


def _delivery_href() -> Callable[[object], str]:
    """A delivery's page from its id, escaped: every row's link differs only by its id, so one reverse() a page
    (~30 µs each)."""
    before, after = reverse("web:delivery", args=[_ANY_ID]).split(str(_ANY_ID))
    return lambda pk: _escape(f"{before}{pk}{after}")


def _month_day_time(moment: datetime) -> str:
    """Django's `date:"m-d H:i"` in the active zone, by strftime (the date filter costs ~0.1 ms a call)."""
    return timezone.localtime(moment).strftime("%m-%d %H:%M")


def _escape(value: object) -> str:
    return html.escape(str(value))
