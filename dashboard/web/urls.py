from django.urls import path

from dashboard.web.views import deliveries, errors, overview, retries, search, streams, timelines

app_name = "web"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("streams/", streams.stream_list, name="streams"),
    path("timeline/", timelines.timeline_page, name="timeline"),
    path("deliveries/", deliveries.delivery_list, name="deliveries"),
    path("deliveries/export.csv", deliveries.delivery_export, name="deliveries-export"),
    path("deliveries/<uuid:pk>/", deliveries.delivery_detail, name="delivery"),
    path("deliveries/<uuid:pk>/payload.json", deliveries.delivery_payload, name="delivery-payload"),
    path("errors/", errors.error_groups, name="errors"),
    path("retries/", retries.retry_statistics, name="retries"),
    path("search/", search.search, name="search"),
]
