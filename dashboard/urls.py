from django.contrib import admin
from django.urls import include, path

from dashboard import health

urlpatterns = [
    path("", include("dashboard.web.urls")),
    path("lookups/", include("dashboard.lookups.urls")),
    path("alerts/", include("dashboard.alerts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
]
