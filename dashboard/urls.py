from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from dashboard import health


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    return HttpResponsePermanentRedirect(static("dashboard/favicon.svg"))


urlpatterns = [
    path("", include("dashboard.web.urls")),
    path("lookups/", include("dashboard.lookups.urls")),
    path("alerts/", include("dashboard.alerts.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    # Browsers ask for it on every page that names no icon (the admin, raw JSON); public like the CSS.
    path("favicon.ico", favicon),
]
