"""Filters the console's lists share: the world a run lives in, id search, ages and dispositions."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from django.db.models import QuerySet

AGES: Mapping[str, tuple[str, dt.timedelta, bool]] = {
    # key: (label, span, newer-than (True) or older-than (False))
    "1h": ("last hour", dt.timedelta(hours=1), True),
    "24h": ("last 24 hours", dt.timedelta(days=1), True),
    "7d": ("last 7 days", dt.timedelta(days=7), True),
    "older-7d": ("older than 7 days", dt.timedelta(days=7), False),
}


DISPOSITIONS = ("COMPLETED", "FAILED", "CANCELLED", "ESCALATED")


# The synthetic world a run acts in: the console's live world, the fault lab's, or an
# isolated execution simulation (namespace "sim-..."). Lists and the approval queue show
# the live world unless asked for another (or for every world).
WORLDS: Mapping[str, str] = {
    "live": "live world",
    "faultlab": "fault lab",
    "simulation": "execution simulations",
    "all": "every world",
}


DEFAULT_WORLD = "live"


def world_from_query(value: str | None) -> str:
    """The world a list shows for the query value ``value`` (unknown or empty: live)."""
    return value if value in WORLDS else DEFAULT_WORLD


def world_label(namespace: str) -> str:
    """The world a run namespace belongs to, as the lists label it ("" for the live world)."""
    if namespace == DEFAULT_WORLD:
        return ""
    if namespace.startswith("sim-"):
        return "simulation"
    return WORLDS.get(namespace, namespace)


def in_world(qs: QuerySet[Any], world: str, *, field: str = "namespace") -> QuerySet[Any]:
    """Narrow ``qs`` to rows whose ``field`` (a run namespace) belongs to ``world``."""
    if world == "all":
        return qs
    if world == "simulation":
        return qs.filter(**{f"{field}__startswith": "sim-"})
    return qs.filter(**{field: world})


ID_SEARCH_ERROR = "A run id is hexadecimal (a full id or a prefix)."


def id_digits(text: str) -> str | None:
    """The hex digits of a full id or a prefix (lower case, no dashes), or None if it is
    not one."""
    digits = text.replace("-", "").lower()
    if not digits or len(digits) > 32 or any(c not in "0123456789abcdef" for c in digits):
        return None
    return digits


def digits_range(digits: str) -> tuple[uuid.UUID, uuid.UUID]:
    """The UUID range the ids starting with ``digits`` (see ``id_digits``) cover."""
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


def id_range(text: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """Return the UUID range a full id or hex prefix covers, or None if it is not hex."""
    digits = id_digits(text)
    return None if digits is None else digits_range(digits)
