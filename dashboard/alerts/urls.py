from django.urls import path

from dashboard.alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.rule_list, name="rules"),
    path("rules/<int:rule_id>/mute/", views.mute_rule, name="mute"),
    path("rules/<int:rule_id>/unmute/", views.unmute_rule, name="unmute"),
    path("rules/<int:rule_id>/test/", views.send_test_mail, name="test_mail"),
    path("incidents/<int:incident_id>/", views.incident_detail, name="incident"),
    path("incidents/<int:incident_id>/resolve/", views.resolve_incident, name="resolve"),
    path("incidents/<int:incident_id>/acknowledge/", views.acknowledge_incident, name="acknowledge"),
    path("incidents/<int:incident_id>/assign/", views.assign_incident, name="assign"),
    path("incidents/<int:incident_id>/notes/", views.add_note, name="note"),
    path("incidents/<int:incident_id>/snooze/", views.snooze_incident, name="snooze"),
    path("incidents/<int:incident_id>/unsnooze/", views.unsnooze_incident, name="unsnooze"),
    path("notifications/<int:notification_id>/", views.notification_detail, name="notification"),
    path("notifications/<int:notification_id>/body.html", views.notification_html, name="notification-html"),
    path("preview/<slug:name>/", views.mail_preview, name="preview"),
    path("preview/<slug:name>/body.html", views.mail_preview_html, name="preview-html"),
]
