from django.urls import path

from dashboard.web.views import (
    actions,
    completeness,
    deliveries,
    errors,
    maintenance,
    overview,
    pairs,
    retries,
    search,
    streams,
    timelines,
)

app_name = "web"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("streams/", streams.stream_list, name="streams"),
    path("maintenance/", maintenance.maintenance_list, name="maintenance"),
    path("streams/<str:stream_id>/", streams.stream_detail, name="stream"),
    path("streams/<str:stream_id>/status/", actions.stream_status_prepare, name="stream-status"),
    path("streams/<str:stream_id>/windows/mark/", completeness.window_mark, name="window-mark"),
    path("windows/<int:pk>/", completeness.outage_window, name="outage-window"),
    path("windows/<int:pk>/scan/", completeness.window_scan, name="window-scan"),
    path("scans/<int:pk>/confirm/", completeness.scan_confirm, name="scan-confirm"),
    path("scans/<int:pk>/cancel/", completeness.scan_cancel, name="scan-cancel"),
    path("scans/<int:pk>/resend/", completeness.scan_resend, name="scan-resend"),
    path("actions/", actions.action_list, name="actions"),
    path("actions/replay/", actions.replay_prepare, name="replay"),
    path("actions/resend-block/", actions.resend_block_prepare, name="resend-block"),
    path("actions/<int:pk>/", actions.action_detail, name="action"),
    path("actions/<int:pk>/confirm/", actions.action_confirm, name="action-confirm"),
    path("actions/<int:pk>/cancel/", actions.action_cancel, name="action-cancel"),
    path("timeline/", timelines.timeline_page, name="timeline"),
    path("deliveries/", deliveries.delivery_list, name="deliveries"),
    path("deliveries/export.csv", deliveries.delivery_export, name="deliveries-export"),
    path("deliveries/confirmation-gaps/", pairs.confirmation_gaps_page, name="confirmation-gaps"),
    path("deliveries/<uuid:pk>/", deliveries.delivery_detail, name="delivery"),
    path("deliveries/<uuid:pk>/payload.json", deliveries.delivery_payload, name="delivery-payload"),
    path("errors/", errors.error_groups, name="errors"),
    path("retries/", retries.retry_statistics, name="retries"),
    path("search/", search.search, name="search"),
]
