"""Tenant membership. Roles are Django groups (see ``access.roles``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Membership(models.Model):
    """Which tenant a user acts for, and the principal reference runs record for them.

    The principal reference is what events and approvals store: never a credential.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    tenant = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant}"

    @property
    def principal_ref(self) -> str:
        return f"user:{self.user.get_username()}"


class SignInFailure(models.Model):
    """One failed sign-in: the throttle counts these (``access.signin``).

    The username is what was typed (it may name no account); the password is never kept.
    """

    username = models.CharField(max_length=150)
    address = models.GenericIPAddressField(null=True, blank=True)
    at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["username", "at"], name="signin_failure_user"),
            models.Index(fields=["address", "at"], name="signin_failure_address"),
        ]

    def __str__(self) -> str:
        return f"{self.username} from {self.address} at {self.at:%Y-%m-%d %H:%M:%S}"
