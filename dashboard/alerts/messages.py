"""What a transition says: the facts, links and texts of an incident's opening or resolution, for a mail
(rendered from its three templates) and for a channel message (a title, a text and the facts as data).

Both are written once, when the transition happens, so every retry of a message sends the same words."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.utils import make_msgid
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from dashboard.alerts.impact import Impact, incident_impact
from dashboard.alerts.models import Condition, Incident, NotificationKind, TargetKind
from dashboard.deliveries.links import deliveries_list_query, deliveries_list_url
from dashboard.sources.models import Source
from dashboard.text import visible

EVENTS = {
    NotificationKind.OPENED: "incident.opened",
    NotificationKind.RESOLVED: "incident.resolved",
    NotificationKind.TEST: "test",
}


@dataclass(frozen=True)
class RenderedMail:
    subject: str
    text: str
    html: str


def render_mail(name: str, context: dict[str, Any]) -> RenderedMail:
    """One mail from its three templates: emails/<name>-subject.txt, -body-text.txt, -body-html.html."""
    context = {"site_url": settings.SITE_URL, **context}
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", context).split())
    return RenderedMail(
        subject=subject[:500],
        text=render_to_string(f"emails/{name}-body-text.txt", context),
        html=render_to_string(f"emails/{name}-body-html.html", context),
    )


def absolute(path: str) -> str:
    """A path of this site (from reverse() or get_absolute_url()) as the link a mail reader can follow."""
    return f"{settings.SITE_URL}{path}"


def alerts_link() -> str:
    return absolute(reverse("alerts:rules"))


def new_message_id() -> str:
    return make_msgid(domain=urlsplit(settings.SITE_URL).hostname or "localhost")


def status_word(incident: Incident) -> str:
    if incident.target_kind == TargetKind.SOURCE:
        return "STALE"
    if incident.rule.condition == Condition.ERROR_STATE_RISK:
        return "AT RISK"
    if incident.rule.condition == Condition.PROVIDER_ERROR_STATE:
        return "STREAM DOWN"
    if incident.rule.condition == Condition.CONFIRMATION_GAP:
        return "CONFIRMATION GAP"
    if incident.rule.condition == Condition.LATENCY_P95:
        return "SLOW"
    if incident.rule.condition == Condition.QUIET_STREAM:
        return "QUIET"
    if incident.rule.condition == Condition.MISSING_BLOCKS:
        return "MISSING BLOCKS"
    if incident.rule.condition in (Condition.SLO_BURN_FAST, Condition.SLO_BURN_SLOW):
        return "BUDGET BURN"
    return "FAILING"


# The deliveries list's status filter that matches what the conditions count: retrying or failed, since
# most deliveries of an incident are still being retried.
FAILING = "failing"


def _target_filter(incident: Incident) -> dict[str, str]:
    """The deliveries list's filters (see dashboard.deliveries.links) selecting an incident's target."""
    if incident.target_kind == TargetKind.STREAM:
        return {"stream": incident.stream_id}
    if incident.target_kind == TargetKind.WEBHOOK_URL:
        return {"url": incident.webhook_url}
    return {}


def deliveries_queries(incident: Incident) -> dict[str, str]:
    """Query strings of the deliveries list for an incident's target (empty for a source's incident)."""
    target = _target_filter(incident)
    if not target:
        return {}
    return {"failed": deliveries_list_query(**target, status=FAILING), "all": deliveries_list_query(**target)}


def incident_links(incident: Incident) -> dict[str, Any]:
    """Absolute links to the filtered dashboard views an incident concerns."""
    links = {"incident": absolute(incident.get_absolute_url()), "alerts": alerts_link()}
    target = _target_filter(incident)
    if target:
        links["failed"] = absolute(deliveries_list_url(**target, status=FAILING))
        links["all"] = absolute(deliveries_list_url(**target))
    return links


def _group_link(target: dict[str, str], group_id: int) -> str:
    return absolute(deliveries_list_url(**target, status=FAILING, group=group_id))


def incident_context(incident: Incident, now: datetime | None = None) -> dict[str, Any]:
    details = dict(incident.details)
    target = _target_filter(incident)
    details["error_groups"] = [
        {**g, "url": _group_link(target, g["id"]) if g.get("id") else ""}
        for g in details.get("error_groups", [])
    ]
    for key in ("since", "status_since", "last_success_at"):
        if isinstance(details.get(key), str):
            details[key] = parse_datetime(details[key]) or details[key]
    details["first_failures"] = [
        {**f, "date": parse_datetime(f["date"]) or f["date"]} for f in details.get("first_failures", [])
    ]
    # Missing blocks: each with the page of the window (audit or outage) that found it, to re-send it from.
    details["missing_blocks"] = [
        {**b, "url": absolute(reverse("web:outage-window", args=[b["window_id"]])) if b.get("window_id") else ""}
        for b in details.get("missing_blocks", [])
    ]
    return {
        "incident": incident,
        "rule": incident.rule,
        "details": details,
        "status_word": status_word(incident),
        "links": incident_links(incident),
        # The figures the incident page shows too, read when the message is written.
        "impact": incident_impact(incident, now or timezone.now()),
    }


def resolved_context(incident: Incident, now: datetime) -> dict[str, Any]:
    """What a resolution message says, by mail or to a channel."""
    context = incident_context(incident, now)
    context["duration"] = (incident.resolved_at or now) - incident.opened_at
    if incident.target_kind == TargetKind.SOURCE:
        # The facts below are those of the opening; say that polling works again now.
        context["polled_at"] = (
            Source.objects.filter(pk=incident.target_key).values_list("last_success_at", flat=True).first()
            if incident.target_key.isdigit()
            else None
        )
    else:
        # The condition looks at recent deliveries; older ones may still be on the provider's retry schedule.
        # Saying so keeps a resolution from reading as "nothing is failing any more".
        context["still_retrying"] = incident.deliveries().still_retrying().count()
    return context


def dedup_key(incident: Incident) -> str:
    """Our incident's key at PagerDuty and Opsgenie, and in the webhook's body."""
    return f"stream-dashboard-incident-{incident.pk}"


def incident_payload(incident: Incident, kind: str, now: datetime) -> dict[str, Any]:
    """The message of a transition, fixed when it happens: title, text, and the facts as data."""
    if kind == NotificationKind.RESOLVED:
        context = resolved_context(incident, now)
        title = render_to_string("emails/incident_resolved-subject.txt", context)
    else:
        context = incident_context(incident, now)
        title = render_to_string("emails/incident_opened-subject.txt", context)
    links = context["links"]
    return {
        "event": EVENTS[kind],  # type: ignore[index]
        "title": " ".join(title.split())[:500],
        "text": render_to_string(f"alerts/channels/{kind}.txt", {"site_url": settings.SITE_URL, **context}),
        "dedup_key": dedup_key(incident),
        "incident": {
            "id": incident.pk,
            "url": links["incident"],
            "status": "resolved" if kind == NotificationKind.RESOLVED else "open",
            "status_word": context["status_word"],
            # Shown by the receiving service as it is: invisible characters made visible here.
            "rule": visible(incident.rule.name),
            "condition": incident.rule.condition,
            "target_kind": incident.target_kind,
            "target": incident.target_key,
            "label": visible(incident.label),
            "stream_id": incident.stream_id,
            "webhook_url": incident.webhook_url,
            "summary": visible(incident.summary),
            "opened_at": incident.opened_at.isoformat(),
            "resolved_at": incident.resolved_at.isoformat() if incident.resolved_at else None,
            "resolved_by": visible(incident.resolved_by),
            "still_retrying": context.get("still_retrying"),
            "impact": _impact_data(context.get("impact")),
        },
        "links": links,
    }


def _impact_data(impact: Impact | None) -> dict[str, Any] | None:
    if impact is None:
        return None
    return {
        "failing_now": impact.failing_now,
        "failed": impact.failed,
        "retrying": impact.retrying,
        "given_up": impact.given_up,
        "recovered": impact.recovered,
        "first_failure": impact.first_failure.isoformat() if impact.first_failure else None,
        "last_failure": impact.last_failure.isoformat() if impact.last_failure else None,
        "since": impact.since.isoformat(),
        "at": impact.at.isoformat(),
    }
