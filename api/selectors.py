"""Reads for the API tokens page: each token with its state and its times told for people."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

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


# Expired and revoked tokens shown per page (every active one is shown: they are capped).
ENDED_PER_PAGE = 20


@dataclass(frozen=True)
class TokenPage:
    """One page of the user's tokens, newest first: on the first page every active token
    and the newest ended (expired or revoked) ones, on a later page older ended ones.
    ``older``: the cursor of the next page (the last ended token's id), None at the end;
    ``older_count``: how many ended tokens that link leads to, from here to the oldest."""

    rows: list[TokenRow]
    first: bool
    older: int | None
    older_count: int


class NoSuchPage(Exception):
    """A page cursor that names none of the user's ended tokens."""


def token_page_for_user(*, user: Any, now: dt.datetime, older: str | None = None) -> TokenPage:
    """The user's tokens at ``now``, a page at a time (see TokenPage). ``older``: the cursor
    a page's link carries (the id of the last ended token it showed); raise NoSuchPage when
    it is not the id of one of the user's ended tokens. Three queries on the first page,
    four on a later one, however many tokens the user has."""
    mine = ApiToken.objects.filter(user=user)
    ended = mine.filter(Q(revoked_at__isnull=False) | Q(expires_at__lte=now))
    rows: list[ApiToken] = []
    if older is None:
        rows.extend(mine.filter(revoked_at__isnull=True, expires_at__gt=now))
    else:
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
        if not (older.isascii() and older.isdigit()) or len(older) > 18:
            raise NoSuchPage(older)
        cursor = ended.filter(pk=int(older)).values_list("created_at", "pk").first()
        if cursor is None:
            raise NoSuchPage(older)
        at, pk = cursor
        ended = ended.filter(Q(created_at__lt=at) | Q(created_at=at, pk__lt=pk))
    ended = ended.order_by("-created_at", "-pk")
    shown = list(ended[:ENDED_PER_PAGE])
    rest = ended.count() - len(shown) if len(shown) == ENDED_PER_PAGE else 0
    rows.extend(shown)
    rows.sort(key=lambda t: (t.created_at, t.pk), reverse=True)
    return TokenPage(
        rows=[token_row(t, now) for t in rows],
        first=older is None,
        older=shown[-1].pk if rest else None,
        older_count=rest,
    )


def token_row(t: ApiToken, now: dt.datetime) -> TokenRow:
    """One token with its state at ``now`` and its times told for people."""
    expired = t.expired_at(now)
    status = "revoked" if t.revoked else "expired" if expired else "active"
    if expired:
        expiry = f"expired {_span(t.expires_at, now)} ago"
    else:
        expiry = f"expires in {_span(now, t.expires_at)}"
    return TokenRow(
        token=t,
        status=status,
        expiry=expiry,
        expires_utc=utc_text(t.expires_at),
        soon=status == "active" and t.expires_at - now < SOON,
        last_used=f"{_span(t.last_used_at, now)} ago" if t.last_used_at else "never",
        last_used_utc=utc_text(t.last_used_at) if t.last_used_at else "",
    )
