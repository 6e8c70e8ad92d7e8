"""The alerts pages: rules with their current state, incidents, and the mails as they were sent."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib import messages
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.accounts.access import staff_required, viewer_required
from dashboard.alerts import actions, mail
from dashboard.alerts.forms import MuteForm
from dashboard.alerts.models import AlertRule, Incident, Notification, NotificationStatus

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
        "rules": _rule_states(rules),
        "open_incidents": list(Incident.objects.open().select_related("rule").order_by("-opened_at")),
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
    incident = get_object_or_404(Incident.objects.select_related("rule"), pk=incident_id)
    notifications = incident.notifications.defer("body_html").order_by("created_at")
    return render(
        request,
        "alerts/incident.html",
        {
            "nav": "alerts",
            "incident": incident,
            "notifications": notifications,
            "channel_deliveries": incident.channel_deliveries.select_related("channel").order_by("created_at", "pk"),
            "deliveries": mail.deliveries_queries(incident),
        },
    )


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


@require_POST
@staff_required
def mute_rule(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    form = MuteForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Choose how long to mute the rule for.")
    until = actions.mute([rule], form.cleaned_data["minutes"])
    messages.success(request, f"“{rule.name}” is muted until {until:%Y-%m-%d %H:%M} UTC.")
    return redirect("alerts:rules")


@require_POST
@staff_required
def unmute_rule(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    actions.unmute([rule])
    messages.success(request, f"“{rule.name}” sends mail again.")
    return redirect("alerts:rules")


@require_POST
@staff_required
def send_test_mail(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = get_object_or_404(AlertRule, pk=rule_id)
    notification = actions.send_test(rule)
    if notification.status == NotificationStatus.PENDING:
        messages.success(request, f"A test mail to {', '.join(notification.recipients)} is on its way.")
    else:
        messages.error(request, f"No test mail sent: {notification.error}")
    return redirect("alerts:rules")


@require_POST
@staff_required
def resolve_incident(request: HttpRequest, incident_id: int) -> HttpResponse:
    incident = get_object_or_404(Incident, pk=incident_id)
    if actions.resolve([incident], by=request.user.get_username()):
        messages.success(request, "The incident is resolved.")
    else:
        messages.info(request, "The incident was already resolved.")
    return redirect("alerts:incident", incident_id=incident.pk)
