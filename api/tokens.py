"""API token writes and the bearer check: create (the secret is returned once), revoke,
authenticate. Tokens are 256-bit random secrets, so a plain SHA-256 digest (compared in
constant time) is the right hash at rest: there is nothing to brute-force as with a
password."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from api.models import ApiToken
from kernel import clock

PREFIX = "fo_"
MAX_ACTIVE_TOKENS = 10
NAME_MAX = 80  # ApiToken.name and the form's maxlength


class TokenError(ValueError):
    """A token request that cannot be honoured (shown to the user)."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_create(*, user: Any, name: str) -> tuple[ApiToken, str]:
    """Create a token for ``user``; return the row and the secret (shown once only).

    Raise TokenError for a missing, over-long or unprintable name or too many active tokens.
    """
    name = (name or "").strip()
    if not name:
        raise TokenError("A token needs a name (what integration uses it).")
    if len(name) > NAME_MAX:
        raise TokenError(
            f"A token name may be at most {NAME_MAX} characters and this one has {len(name)}; "
            "no token was created."
        )
    if not name.isprintable():  # a line break, a tab, a right-to-left override, NUL
        raise TokenError("A token name must not contain control characters; no token was created.")
    with transaction.atomic():
        # The user's row, locked: two creations at once count one after the other, so
        # a burst of requests cannot pass the limit (on SQLite the transaction's
        # BEGIN IMMEDIATE serializes them the same way).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        active = ApiToken.objects.filter(user=user, revoked_at__isnull=True).count()
        if active >= MAX_ACTIVE_TOKENS:
            raise TokenError(f"At most {MAX_ACTIVE_TOKENS} active tokens; revoke one first.")
        public = secrets.token_hex(6)
        token = f"{PREFIX}{public}_{secrets.token_urlsafe(32)}"
        row = ApiToken.objects.create(
            user=user, name=name, prefix=public, digest=_digest(token), created_at=clock.now()
        )
    return row, token


def token_revoke(*, user: Any, token_id: int) -> ApiToken:
    """Revoke one of ``user``'s tokens (idempotent). Raise ApiToken.DoesNotExist for a
    token that is not theirs."""
    row = ApiToken.objects.get(pk=token_id, user=user)
    if row.revoked_at is None:
        ApiToken.objects.filter(pk=row.pk, revoked_at__isnull=True).update(revoked_at=clock.now())
        row.refresh_from_db()
    return row


def token_user(token: str) -> Any | None:
    """The active user a bearer token stands for, or None (unknown, revoked, inactive)."""
    if not token.startswith(PREFIX) or len(token) > 100:
        return None
    public = token[len(PREFIX) :].split("_", 1)[0]
    row = (
        ApiToken.objects.select_related("user")
        .filter(prefix=public, revoked_at__isnull=True)
        .first()
    )
    if row is None or not hmac.compare_digest(row.digest, _digest(token)):
        return None
    if not row.user.is_active:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=clock.now())
    return row.user
