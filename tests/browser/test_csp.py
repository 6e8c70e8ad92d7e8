"""Every page in Chromium under the Content-Security-Policy: no inline script or style, nothing loaded from
where the policy does not allow. Any violation Chromium reports (the `securitypolicyviolation` event, or its
console message) fails the test."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from dashboard.actions.models import ActionKind, ProviderAction
from dashboard.alerts import mail
from dashboard.alerts.models import AlertRule, Incident, Notification, NotificationKind, TargetKind
from dashboard.deliveries.models import Delivery, Stream
from dashboard.sources.models import Source
from tests.browser.test_dashboard import filled  # noqa: F401
from tests.lookups.conftest import APTOS_CREATOR, BAYC

pytestmark = pytest.mark.browser

# Runs in every document and frame before the page's own scripts: reports each violation to the test.
LISTEN = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.reportViolation([location.pathname, e.violatedDirective, e.blockedURI, e.sourceFile, e.lineNumber].join(" "));
});
"""


class Violations:
    def __init__(self, page: Any) -> None:
        self.events: list[str] = []
        self.console: list[str] = []
        page.context.expose_binding("reportViolation", lambda source, text: self.events.append(text))
        page.context.add_init_script(LISTEN)
        page.on("console", self._on_console)

    def _on_console(self, message: Any) -> None:
        text = message.text
        if "Content Security Policy" in text or "Content-Security-Policy" in text:
            self.console.append(text)

    def all(self) -> list[str]:
        return self.events + self.console


def _alert_rows(source: Source) -> tuple[Incident, Notification]:
    now = timezone.now()
    rule = AlertRule.objects.order_by("pk").first() or AlertRule.objects.create(name="Failed deliveries")
    stream = Stream.objects.order_by("stream_id").first()
    assert stream is not None
    incident = Incident.objects.create(
        rule=rule, target_kind=TargetKind.STREAM, target_key=stream.stream_id, label=stream.tag,
        stream_id=stream.stream_id, summary="3 failed deliveries", opened_at=now, last_holding_at=now,
        message_id="<incident-1@dashboard>",
    )
    rendered = mail.preview("incident_opened")
    notification = Notification.objects.create(
        kind=NotificationKind.OPENED, rule=rule, incident=incident, recipients=["ops@example.com"],
        subject=rendered.subject, body_text=rendered.text, body_html=rendered.html,
        message_id="<mail-1@dashboard>", created_at=now,
    )
    return incident, notification


def _pages(source: Source) -> list[str]:
    delivery = Delivery.objects.failures().exclude(payload=None).newest_first().first()
    assert delivery is not None
    incident, notification = _alert_rows(source)
    action = ProviderAction.objects.create(
        kind=ActionKind.SET_STATUS, source=source, requested_by_name="operator", stream_id=delivery.stream_id,
        scope="stream", wanted_status="paused",
    )
    def hours_ago(hours: int) -> str:
        return (timezone.now() - timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S")

    return [
        "/",
        "/streams/",
        f"/streams/{delivery.stream_id}/",
        "/timeline/?range=7d",
        # A zoomed window in another zone: the chart's controls and the zone field.
        f"/timeline/?range=custom&start={hours_ago(6)}&end={hours_ago(1)}&tz=Europe/Berlin",
        f"/?range=custom&start={hours_ago(30)}&end={hours_ago(2)}&tz=Asia/Tokyo",
        "/timeline/?tz=Mars/Olympus",  # the 400 page for an unknown zone
        "/deliveries/",
        "/deliveries/?status=failing",
        f"/deliveries/{delivery.pk}/",
        "/errors/",
        "/retries/",
        "/search/",
        f"/search/?q={delivery.pk}",
        "/deliveries/?retries=99",  # the 400 page with its "Go back" button
        "/lookups/owners/",
        f"/lookups/owners/?address={BAYC}&chain=eth&media_items=on&normalize_metadata=on",
        "/lookups/creators/",
        f"/lookups/creators/?addresses={APTOS_CREATOR}&network=mainnet",
        "/alerts/",
        f"/alerts/incidents/{incident.pk}/",
        f"/alerts/notifications/{notification.pk}/",
        "/alerts/preview/incident_opened/",
        "/actions/",
        f"/actions/{action.pk}/",
        "/admin/",
        "/admin/deliveries/delivery/",
        f"/admin/deliveries/delivery/{delivery.pk}/change/",
        f"/admin/sources/source/{source.pk}/change/",
        "/admin/alerts/alertrule/",
        "/admin/alerts/notification/",
        "/no-such-page/",
    ]


def test_no_page_breaks_the_content_security_policy(page: Any, filled: Source) -> None:  # noqa: F811
    violations = Violations(page)
    for path in _pages(filled):
        response = page.goto(path)
        assert response is not None and response.status in (200, 400, 404), path
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy, path
        page.wait_for_load_state("load")
        # Thumbnails, the mail frame and late styles have loaded; any violation has been reported.
        page.wait_for_timeout(150)
        assert violations.all() == [], path
    # The page's own refresh swaps in server-rendered partials: they must obey the policy too.
    page.goto("/")
    page.evaluate("window.liveRefresh(0.05, (html) => { document.querySelector('[data-live]').innerHTML = html; return false; })")
    page.wait_for_timeout(1000)
    assert violations.all() == []


def test_the_listener_catches_a_violation(page: Any, filled: Source) -> None:  # noqa: F811
    violations = Violations(page)
    page.goto("/")
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<p style=\"color: red\">inline</p>')")
    page.evaluate("() => { const s = document.createElement('script'); s.textContent = '1'; document.body.append(s); }")
    page.wait_for_timeout(300)
    directives = " ".join(violations.events)
    assert "style-src-attr" in directives and "script-src-elem" in directives
    assert violations.console


def test_the_mail_frame_shows_the_styled_mail_under_its_own_policy(page: Any, filled: Source) -> None:  # noqa: F811
    _, notification = _alert_rows(filled)
    violations = Violations(page)
    page.goto(f"/alerts/notifications/{notification.pk}/")
    frame = page.frame_locator("iframe.mail-frame")
    assert "failed deliveries to hooks.example.com" in frame.locator("body").inner_text()
    # The mail's inline styles apply inside the frame (its own policy allows them).
    red = frame.locator("[style*='color:#c92a2a']").first.evaluate("e => getComputedStyle(e).color")
    assert red == "rgb(201, 42, 42)"
    assert violations.all() == []
    response = page.request.get(f"/alerts/notifications/{notification.pk}/body.html")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy and "frame-ancestors 'self'" in policy
    assert "script-src" not in policy
    assert response.headers["x-frame-options"] == "SAMEORIGIN"


def test_pages_refuse_to_be_framed_and_send_the_hardening_headers(page: Any, filled: Source) -> None:  # noqa: F811
    response = page.request.get("/streams/")
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"
