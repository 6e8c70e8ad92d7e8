from django.urls import path

from dashboard.accounts import views

# Names the library looks up (OIDC_AUTHENTICATION_CALLBACK_URL's default), so not namespaced.
urlpatterns = [
    path("authenticate/", views.SignInStart.as_view(), name="oidc_authentication_init"),
    path("callback/", views.SignInCallback.as_view(), name="oidc_authentication_callback"),
]
