"""The dashboard's own permissions. They belong to no table: Django hangs permissions on a model."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class Access(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = "dashboard access"
        permissions = [
            ("view_dashboard", "Can read the dashboard and the lookup pages"),
            ("manage_dashboard", "Can manage sources, alert rules and incidents"),
            ("view_all_streams", "Sees every stream, not only those of the user's teams"),
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


class Team(models.Model):
    """A team owns streams, by id or by a pattern on their tag; its members see those streams and nothing else
    (unless their role sees every stream). Streams no team claims belong to the team named by DEFAULT_TEAM.
    Which streams a team's claims come to is worked out in `deliveries.teams`."""

    name = models.CharField(max_length=100, unique=True)
    stream_ids = ArrayField(
        models.CharField(max_length=64), default=list, blank=True,
        help_text="Stream ids the team owns, comma-separated.",
    )
    tag_patterns = ArrayField(
        models.CharField(max_length=255), default=list, blank=True,
        help_text="Tags of the streams the team owns, comma-separated; * and ? match any text and any one "
        "character (payments-*).",
    )
    alert_emails = models.TextField(
        blank=True,
        help_text="Comma- or newline-separated addresses that get the mails of every incident of the team's streams.",
    )
    members: models.ManyToManyField[Any, Any] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="TeamMembership", related_name="teams", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def email_list(self) -> list[str]:
        return [a.strip() for a in self.alert_emails.replace("\n", ",").split(",") if a.strip()]


class TeamMembership(models.Model):
    """A user in a team: added by hand, or from the identity provider's groups claim (OIDC_TEAM_MAP), which
    each sign-in sets again."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships")
    from_identity_provider = models.BooleanField(default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="team_membership_once")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"
