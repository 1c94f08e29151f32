"""Reads for the API tokens page: each token with its state and its times told for people."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from api.models import ApiToken

# Under this much time left, the list marks a token "expires soon".
SOON = dt.timedelta(days=7)


def utc_text(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(earlier: dt.datetime, later: dt.datetime) -> str:
    """The time between, in its largest whole unit up to days ("12 days", not Django's
    "1 week, 5 days": token lifetimes are chosen in days)."""
    seconds = int((later - earlier).total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return "under a minute"


@dataclass(frozen=True)
class TokenRow:
    token: ApiToken
    status: str  # "active", "expired" or "revoked" (revoked wins over expired)
    expiry: str  # "expires in 12 days" / "expired 3 days ago"
    expires_utc: str
    soon: bool
    last_used: str  # "never" / "5 minutes ago"
    last_used_utc: str

    @property
    def revocable(self) -> bool:
        # An expired token can still be revoked: the list then says what its owner did.
        return self.status != "revoked"


def token_list_for_user(*, user: Any, now: dt.datetime) -> list[TokenRow]:
    """The user's tokens, newest first, as the list shows them at ``now``."""
    rows = []
    for t in ApiToken.objects.filter(user=user).order_by("-created_at"):
        expired = t.expired_at(now)
        status = "revoked" if t.revoked else "expired" if expired else "active"
        if expired:
            expiry = f"expired {_span(t.expires_at, now)} ago"
        else:
            expiry = f"expires in {_span(now, t.expires_at)}"
        rows.append(
            TokenRow(
                token=t,
                status=status,
                expiry=expiry,
                expires_utc=utc_text(t.expires_at),
                soon=status == "active" and t.expires_at - now < SOON,
                last_used=f"{_span(t.last_used_at, now)} ago" if t.last_used_at else "never",
                last_used_utc=utc_text(t.last_used_at) if t.last_used_at else "",
            )
        )
    return rows
