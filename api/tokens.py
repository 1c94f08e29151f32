"""API token writes and the bearer check: create (the secret is returned once), revoke,
authenticate. Tokens are 256-bit random secrets, so a plain SHA-256 digest (compared in
constant time) is the right hash at rest: there is nothing to brute-force as with a
password.

Every token expires: its lifetime is chosen at creation from ``LIFETIME_DAYS``; there is
no "never" (a bearer secret that outlives its purpose is the leak nobody notices; an
integration that runs for years rotates a 365-day token)."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Q

from api.models import ApiToken
from kernel import clock
from kernel.text import nothing_shown_note, shows_nothing

PREFIX = "fo_"
MAX_ACTIVE_TOKENS = 10
NAME_MAX = 80  # ApiToken.name and the form's maxlength
LIFETIME_DAYS = (7, 30, 90, 365)
DEFAULT_LIFETIME_DAYS = 90
# last_used_at is written at most this often per token: not a write on every request.
LAST_USED_EVERY = dt.timedelta(minutes=1)
# What a whole token looks like (PREFIX, 12 hex digits, "_", the secret part).
TOKEN_SHAPE = re.compile(r"fo_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}")


class TokenError(ValueError):
    """A token request that cannot be honoured (shown to the user); ``field`` is the form
    field at fault ("name", "lifetime_days") or None."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class TokenAlreadyCreated(Exception):
    """The console form with this one-time key created ``token`` already (a reload of the
    page showing its secret, or the same post sent twice at once)."""

    def __init__(self, token: ApiToken) -> None:
        super().__init__(f"this form already created token {token.prefix}")
        self.token = token


class TokenAlreadyRevoked(Exception):
    """A revoke of ``token``, which was revoked before (a second tab, a resent form)."""

    def __init__(self, token: ApiToken) -> None:
        super().__init__(f"token {token.prefix} was revoked already")
        self.token = token


class TokenExpired(Exception):
    """A bearer token that was valid but whose lifetime has run out."""

    def __init__(self, expires_at: dt.datetime) -> None:
        super().__init__(f"token expired at {clock.iso(expires_at)}")
        self.expires_at = expires_at


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _lifetimes_text() -> str:
    *first, last = (str(d) for d in LIFETIME_DAYS)
    return f"{', '.join(first)} or {last} days"


def lifetime_from_form(values: Sequence[str]) -> int:
    """The lifetime in days a form field holds (``request.POST.getlist``).

    Raise TokenError unless the field is given exactly once and is exactly one of the
    offered values as the form writes it ("90", not " 90", "090", "+90" or "٩٠")."""
    offered = {str(days): days for days in LIFETIME_DAYS}
    if len(values) != 1:
        given = "not given" if not values else f"given {len(values)} times"
        raise TokenError(
            f"Choose one lifetime ({_lifetimes_text()}); it was {given}. No token was created.",
            "lifetime_days",
        )
    days = offered.get(values[0])
    if days is None:
        raise TokenError(
            f"A token's lifetime is one of {_lifetimes_text()}; no token was created.",
            "lifetime_days",
        )
    return days


def token_name_clean(name: str) -> str:
    """The name stripped; raise TokenError for a missing, over-long or unprintable one."""
    name = (name or "").strip()
    if shows_nothing(name):
        note = nothing_shown_note(name)
        raise TokenError(f"A token needs a name (what integration uses it){note}.", "name")
    if len(name) > NAME_MAX:
        raise TokenError(
            f"A token name may be at most {NAME_MAX} characters and this one has {len(name)}; "
            "no token was created.",
            "name",
        )
    if not name.isprintable():  # a line break, a tab, a right-to-left override, NUL
        raise TokenError(
            "A token name must not contain control characters; no token was created.", "name"
        )
    return name


def token_create(
    *, user: Any, name: str, lifetime_days: int = DEFAULT_LIFETIME_DAYS, create_key: str = ""
) -> tuple[ApiToken, str]:
    """Create a token for ``user`` that expires ``lifetime_days`` from now; return the row
    and the secret (shown once only).

    Raise TokenError for a missing, over-long or unprintable name, a lifetime that is not
    one of LIFETIME_DAYS, or too many active tokens (revoked and expired ones do not count).
    With ``create_key`` (the console form's one-time key), raise TokenAlreadyCreated when
    that key created a token of the user already, also one committed a moment ago by the
    same form posted twice at once (the check is made under the user's lock).
    """
    name = token_name_clean(name)
    if type(lifetime_days) is not int or lifetime_days not in LIFETIME_DAYS:
        raise TokenError(
            f"A token's lifetime is one of {_lifetimes_text()}; no token was created.",
            "lifetime_days",
        )
    with transaction.atomic():
        # The user's row, locked: two creations at once count one after the other, so
        # a burst of requests cannot pass the limit (on SQLite the transaction's
        # BEGIN IMMEDIATE serializes them the same way).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if create_key:
            earlier = ApiToken.objects.filter(user=user, create_key=create_key).first()
            if earlier is not None:
                raise TokenAlreadyCreated(earlier)
        now = clock.now()
        active = ApiToken.objects.filter(
            user=user, revoked_at__isnull=True, expires_at__gt=now
        ).count()
        if active >= MAX_ACTIVE_TOKENS:
            raise TokenError(f"At most {MAX_ACTIVE_TOKENS} active tokens; revoke one first.")
        public = secrets.token_hex(6)
        token = f"{PREFIX}{public}_{secrets.token_urlsafe(32)}"
        row = ApiToken.objects.create(
            user=user,
            name=name,
            prefix=public,
            digest=_digest(token),
            created_at=now,
            expires_at=now + dt.timedelta(days=lifetime_days),
            create_key=create_key,
        )
    return row, token


def token_revoke(*, user: Any, token_id: int) -> ApiToken:
    """Revoke one of ``user``'s tokens, expired or not. Raise ApiToken.DoesNotExist for a
    token that is not theirs, TokenAlreadyRevoked (nothing written: the first time stays)
    for one revoked already, also by a revoke a moment ago (the update is conditional).

    The update waits for the API actions in flight with the token (each holds its row
    FOR SHARE: ``token_held``); when this returns, none of them commits any more."""
    row = ApiToken.objects.get(pk=token_id, user=user)
    done = ApiToken.objects.filter(pk=row.pk, revoked_at__isnull=True).update(
        revoked_at=clock.now()
    )
    row.refresh_from_db()
    if not done:
        raise TokenAlreadyRevoked(row)
    return row


def token_authenticate(token: str) -> ApiToken | None:
    """The token row (with its user) a bearer token is, or None (unknown, revoked, inactive
    user). The request's action still calls ``token_held`` in its own transaction.

    Raise TokenExpired for a token that is right, not revoked, of an active user, but past
    its ``expires_at`` (nothing is written then). Record ``last_used_at`` at most once per
    LAST_USED_EVERY: a conditional update, so concurrent requests write it once."""
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
    now = clock.now()
    if row.expired_at(now):
        raise TokenExpired(row.expires_at)
    stale = now - LAST_USED_EVERY
    if row.last_used_at is None or row.last_used_at <= stale:
        ApiToken.objects.filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=stale), pk=row.pk
        ).update(last_used_at=now)
    return row


def token_held(token_id: int) -> bool:
    """Inside an action's transaction: True while token ``token_id`` is not revoked and its
    user is active, and it stays so until that transaction ends (False: revoked, its user
    deactivated, or deleted with its user).

    A token is checked once when the request authenticates, and its action runs later in
    a transaction of its own: a revoke or a deactivation in between let the action commit
    after it. This re-read, one statement, holds the token's row and its user's row with a
    share lock until the action commits or rolls back, and the revoke's conditional UPDATE
    waits for it: once ``token_revoke`` returns, no action with that token commits any more.

    The user's row is held too (FOR SHARE without OF locks every row of the join), so a
    deactivation (``is_active=False`` saved on the user: an UPDATE of that row) waits for
    the user's actions in flight just as a revoke does, and once it has returned no action
    of the user commits. Without the lock the re-read would refuse only a deactivation
    committed before it, and one committed while the action runs would still let it
    through. The cost: every UPDATE of an acting user's row waits for their in-flight API
    actions (a deactivation, ``set_user``, the ``last_login`` a console sign-in writes,
    ``token_create``'s FOR UPDATE), for as long as one action takes; no action locks a
    user's row otherwise, so the shared locks of two actions never wait for each other.

    The lock is PostgreSQL's FOR SHARE, by a raw query: Django's ``select_for_update``
    offers FOR UPDATE and FOR NO KEY UPDATE only, and either would also serialize every
    action of one token against each other. FOR KEY SHARE would not do at all: the revoke
    and the deactivation are UPDATEs of a non-key column, which take FOR NO KEY UPDATE, and
    that does not wait for KEY SHARE. FOR SHARE is taken by any number of actions at once
    and makes every UPDATE of the rows wait: the revoke and a ``last_used_at`` refresh
    (written at most once per LAST_USED_EVERY, so another request of the same token waits
    for an in-flight action at most that often). On SQLite every transaction begins
    IMMEDIATE, holding the database's write lock from its start, so the same plain read is
    as good: the revoke or deactivation waits for the action's commit just the same."""
    if not connection.in_atomic_block:
        raise RuntimeError("token_held reads the token inside the action's transaction")
    quote = connection.ops.quote_name
    tokens = quote(ApiToken._meta.db_table)
    user_model = get_user_model()
    users = quote(user_model._meta.db_table)
    user_pk = quote(user_model._meta.pk.column)
    token_user = quote(ApiToken._meta.get_field("user").column)
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT t.revoked_at, u.is_active FROM {tokens} t "  # noqa: S608  # nosec B608
            f"INNER JOIN {users} u ON u.{user_pk} = t.{token_user} WHERE t.id = %s{lock}",
            [token_id],
        )
        found = cursor.fetchone()
    return found is not None and found[0] is None and bool(found[1])
