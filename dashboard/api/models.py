"""API tokens: a user's key for scripts, stored only as a SHA-256 digest of its secret."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

READ = "read"
ACT = "act"
ADMIN = "admin"
SCOPE_CHOICES = [
    (READ, "read: deliveries, streams, error groups and incidents"),
    (ACT, "act: incident changes and actions at the provider"),
    (ADMIN, "admin: alert rules, channels and maintenance windows, as in the admin"),
]


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def usable(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())


class ApiToken(models.Model):
    """A bearer token. The secret (`sdt_…`) is shown once when the token is made; the row keeps its first
    characters (`prefix`, to find the row and to show which token it is) and the SHA-256 of the whole."""

    name = models.CharField(max_length=80)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    scopes = ArrayField(models.CharField(max_length=16, choices=SCOPE_CHOICES))
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = models.CharField(max_length=150, blank=True, editable=False)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_from = models.CharField(max_length=64, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= timezone.now():
            return "expired"
        return "active"
