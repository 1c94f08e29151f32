"""Per-user API tokens: only a SHA-256 digest of each secret is stored."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token that acts as its user (their tenant and roles) until it is revoked
    or reaches ``expires_at``, whichever comes first."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=80)
    # The public part of the token (shown in the console, used to find the row).
    prefix = models.CharField(max_length=16, unique=True)
    # sha256 of the whole token; the secret itself is shown once and never stored.
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    # Chosen at creation from api.tokens.LIFETIME_DAYS; there is no "never".
    expires_at = models.DateTimeField()
    # Written at most once a minute per token (api.tokens.LAST_USED_EVERY).
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The one-time key of the console form that created it ("" for none): the same form
    # posted again, even at the same moment, finds this token instead of making another.
    create_key = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "create_key"],
                condition=~models.Q(create_key=""),
                name="api_token_create_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def expired_at(self, now: dt.datetime) -> bool:
        """True when the token's lifetime has run out at ``now`` (revoked or not)."""
        return self.expires_at <= now
