"""The dashboard's own permissions. They belong to no table: Django hangs permissions on a model."""

from __future__ import annotations

from django.db import models


class Access(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "dashboard access"
        permissions = [
            ("view_dashboard", "Can read the dashboard and the lookup pages"),
            ("manage_dashboard", "Can manage sources, alert rules and incidents"),
        ]

    def __str__(self) -> str:
        return "dashboard access"


class OidcIdentity(models.Model):
    """The identity provider's account behind a user who signs in with OpenID Connect. (issuer, subject) is
    what the provider never changes, so a renamed account stays one user."""

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    # The groups claim of the last sign-in, as sent.
    groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "identity provider account"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_issuer_subject")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
