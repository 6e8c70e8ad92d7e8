from django.urls import path

from dashboard.lookups import views

app_name = "lookups"

urlpatterns = [
    path("owners/", views.owners, name="owners"),
    path("creators/", views.creators, name="creators"),
]
