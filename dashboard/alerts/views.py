"""The alerts pages: rules with their current state, incidents, and the mails as they were sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from csp.constants import HEADER as CSP_HEADER
from csp.utils import build_policy
from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET, require_POST

from dashboard.accounts.access import staff_required, viewer_required
from dashboard.actions.models import ACT_AT_PROVIDER
from dashboard.alerts import mail, workflow
from dashboard.alerts.forms import AssignForm, MuteForm, NoteForm, SnoozeForm
from dashboard.alerts.impact import incident_impact
from dashboard.alerts.messages import deliveries_queries
from dashboard.alerts.models import AlertRule, Incident, Notification, NotificationStatus
from dashboard.alerts.timeline import timeline
from dashboard.deliveries.links import deliveries_list_query
from dashboard.deliveries.models import Stream
from dashboard.deliveries.schedule import retries_stopped
from dashboard.text import visible
from dashboard.times import iso_minutes

RECENT_NOTIFICATIONS = 30
RECENT_INCIDENTS = 20


def _rule_states(rules: Sequence[AlertRule]) -> list[dict[str, object]]:
    now = timezone.now()
    states = []
    for rule in rules:
        if not rule.enabled:
            state, label = "pill-muted", "Disabled"
        elif rule.open_incidents:  # type: ignore[attr-defined]
            state, label = "status-failed", f"{rule.open_incidents} open"  # type: ignore[attr-defined]
        else:
            state, label = "status-delivered", "OK"
        states.append({"rule": rule, "state": state, "label": label, "muted": rule.is_muted(now)})
    return states


@viewer_required
def rule_list(request: HttpRequest) -> HttpResponse:
    rules = list(
        AlertRule.objects.annotate(open_incidents=Count("incidents", filter=Q(incidents__resolved_at=None)))
    )
    context = {
        "nav": "alerts",
        "now": timezone.now(),
        "rules": _rule_states(rules),
        "open_incidents": list(Incident.objects.open().select_related("rule", "assignee").order_by("-opened_at")),
        "recent_incidents": Incident.objects.filter(resolved_at__isnull=False)
        .select_related("rule")
        .order_by("-resolved_at")[:RECENT_INCIDENTS],
        "notifications": Notification.objects.select_related("rule").defer("body_text", "body_html")[
            :RECENT_NOTIFICATIONS
        ],
        "held": Notification.objects.filter(status=NotificationStatus.HELD).count(),
        "mute_form": MuteForm(),
    }
    return render(request, "alerts/rules.html", context)


@viewer_required
def incident_detail(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("rule", "assignee"), pk=incident_id)
    notifications = incident.notifications.defer("body_html").order_by("created_at")
    now = timezone.now()
    return render(
        request,
        "alerts/incident.html",
        {
            "nav": "alerts",
            "incident": incident,
            "timeline": timeline(incident, now),
            "snoozed": incident.snoozed_until is not None and incident.snoozed_until > now,
            "assign_form": AssignForm(initial={"assignee": incident.assignee_id}),
            "note_form": NoteForm(),
            "snooze_form": SnoozeForm(),
            "notifications": notifications,
            "channel_messages": incident.channel_messages.select_related("channel").order_by("created_at", "pk"),
            "deliveries": deliveries_queries(incident),
            "impact": incident_impact(incident, now),
            "status_since": parse_datetime(str(incident.details.get("status_since") or "")),
            **_stream_context(request, incident),
        },
    )


def _stream_context(request: HttpRequest, incident: Incident) -> dict[str, Any]:
    """Whether the provider still retries the incident's stream's deliveries, and (for a user who may act at the
    provider) the list filter a replay of its failures starts from (web:replay prepares it, to be confirmed)."""
    if not incident.stream_id:
        return {}
    status = Stream.objects.statuses_not_active([incident.stream_id]).get(incident.stream_id, "")
    may_act = bool(settings.PROVIDER_WRITES) and request.user.has_perm(ACT_AT_PROVIDER)
    return {
        "retries_stopped": retries_stopped(status),
        "replay_filters": deliveries_list_query(stream=incident.stream_id, status="failing") if may_act else "",
    }


@viewer_required
def notification_detail(request: HttpRequest, notification_id: int) -> HttpResponse:
    notification = get_object_or_404(
        Notification.objects.select_related("rule", "incident"), pk=notification_id
    )
    return render(request, "alerts/notification.html", {"nav": "alerts", "notification": notification})


@staff_required
def mail_preview(request: HttpRequest, name: str) -> HttpResponse:
    if name not in mail.PREVIEWS:
        raise Http404("no such mail")
    rendered = mail.preview(name)
    return render(
        request,
        "alerts/preview.html",
        {"nav": "alerts", "name": name, "names": mail.PREVIEWS, "mail": rendered},
    )


# The HTML part of a mail, for the frame on the mail and preview pages. Mail HTML carries inline styles
# (mail clients need them), so it gets a policy of its own: inline styles and images, no scripts, nothing
# else loaded, sandboxed, and framed only by our own pages.
MAIL_HTML_POLICY = {
    "default-src": ["'none'"],
    "style-src": ["'unsafe-inline'"],
    "img-src": ["https:", "data:"],
    "frame-ancestors": ["'self'"],
    "sandbox": True,
}


def _mail_html(html: str) -> HttpResponse:
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    # Set here, the middlewares leave them as they are.
    response[CSP_HEADER] = build_policy(config=MAIL_HTML_POLICY)
    response["X-Frame-Options"] = "SAMEORIGIN"
    return response


@require_GET
@viewer_required
def notification_html(request: HttpRequest, notification_id: int) -> HttpResponse:
    notification = get_object_or_404(Notification.objects.only("body_html"), pk=notification_id)
    return _mail_html(notification.body_html)


@require_GET
@staff_required
def mail_preview_html(request: HttpRequest, name: str) -> HttpResponse:
    if name not in mail.PREVIEWS:
        raise Http404("no such mail")
    return _mail_html(mail.preview(name).html)


@require_POST
@staff_required
def mute_rule(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    form = MuteForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Choose how long to mute the rule for.")
    until = workflow.mute([rule], form.cleaned_data["minutes"])
    messages.success(request, f"“{visible(rule.name)}” is muted until {iso_minutes(until)}.")
    return redirect("alerts:rules")


@require_POST
@staff_required
def unmute_rule(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    workflow.unmute([rule])
    messages.success(request, f"“{visible(rule.name)}” sends mail again.")
    return redirect("alerts:rules")


@require_POST
@staff_required
def send_test_mail(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    notification = workflow.send_test(rule)
    if notification.status == NotificationStatus.PENDING:
        messages.success(request, f"A test mail to {', '.join(notification.recipients)} is on its way.")
    else:
        messages.error(request, f"No test mail sent: {notification.error}")
    return redirect("alerts:rules")


@require_POST
@staff_required
def resolve_incident(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=incident_id)
    if workflow.resolve([incident], by=request.user.get_username()):
        messages.success(request, "The incident is resolved.")
    else:
        messages.info(request, "The incident was already resolved.")
    return redirect("alerts:incident", incident_id=incident.pk)


def _incident_or_404(incident_id: int) -> Incident:
    return get_object_or_404(Incident, pk=incident_id)


def _back(incident: Incident) -> HttpResponse:
    return redirect("alerts:incident", incident_id=incident.pk)


@require_POST
@staff_required
def acknowledge_incident(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = _incident_or_404(incident_id)
    if workflow.acknowledge(incident, by=request.user.get_username()):
        messages.success(request, "Acknowledged: digests stop listing this incident.")
    else:
        messages.info(request, "The incident was already acknowledged or is resolved.")
    return _back(incident)


@require_POST
@staff_required
def assign_incident(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = _incident_or_404(incident_id)
    form = AssignForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Choose a staff member to assign the incident to, or nobody.")
    assignee = form.cleaned_data["assignee"]
    if workflow.assign(incident, assignee, by=request.user.get_username()):
        messages.success(request, f"Assigned to {visible(assignee.get_username())}." if assignee else "Unassigned.")
    return _back(incident)


@require_POST
@staff_required
def add_note(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = _incident_or_404(incident_id)
    form = NoteForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("A note needs some text, at most 5000 characters.")
    workflow.add_note(incident, form.cleaned_data["text"], by=request.user.get_username())
    messages.success(request, "Note added.")
    return _back(incident)


@require_POST
@staff_required
def snooze_incident(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = _incident_or_404(incident_id)
    form = SnoozeForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Choose how long to snooze the incident for.")
    until = workflow.snooze(incident, form.cleaned_data["minutes"], by=request.user.get_username())
    if until is None:
        messages.info(request, "The incident is resolved; there is nothing to snooze.")
    else:
        messages.success(request, f"Snoozed until {iso_minutes(until)}: digests leave it out until then.")
    return _back(incident)


@require_POST
@staff_required
def unsnooze_incident(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = _incident_or_404(incident_id)
    if workflow.unsnooze(incident, by=request.user.get_username()):
        messages.success(request, "Snooze ended.")
    return _back(incident)
