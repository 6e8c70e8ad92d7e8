from django.contrib import admin
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from dashboard import health, metrics
from dashboard.accounts import views as accounts_views


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    return HttpResponsePermanentRedirect(static("dashboard/favicon.svg"))


urlpatterns = [
    path("", include("dashboard.web.urls")),
    path("lookups/", include("dashboard.lookups.urls")),
    path("alerts/", include("dashboard.alerts.urls")),
    path("api/v1/", include("dashboard.api.urls")),
    path("account/tokens/", include("dashboard.api.pages_urls")),
    # Login and logout only: users are managed by staff, so there is no password reset by mail (its URLs
    # answer 404) and no self-service password change.
    path("accounts/login/", accounts_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", accounts_views.logout, name="logout"),
    # Sign-in with the identity provider (OpenID Connect): its start and the provider's redirect back.
    path("oidc/", include("dashboard.accounts.urls")),
    # Sources moved from the deliveries app to their own; old admin bookmarks still lead there.
    re_path(
        r"^admin/deliveries/source/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/sources/source/%(rest)s", permanent=True, query_string=True),
    ),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    # Browsers ask for it on every page that names no icon (the admin, raw JSON); public like the CSS.
    path("favicon.ico", favicon),
]
