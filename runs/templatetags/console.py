"""Small template helpers for the console: world labels, durations, refs, JSON."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django import template
from django.urls import reverse

from access.roles import APPROVER, OPERATOR, roles_of
from kernel.canonical import canonical_json
from runs.console import filters

register = template.Library()


@register.filter
def checkpoint_readable_by(checkpoint: Any, user: Any) -> bool:
    """``{% if c|checkpoint_readable_by:user %}``: link a checkpoint only for who may open
    it (``access.objects.checkpoint_readable_by``); others see its id, not a 403."""
    from access.objects import checkpoint_readable_by as readable

    return readable(user, checkpoint)


@register.filter
def world_label(namespace: str) -> str:
    """How the runs list names a run's world: nothing for the live world."""
    return filters.world_label(namespace)


@register.simple_tag(takes_context=True)
def ref_url(context: Any, run: Any, ref: Any) -> str:
    """Where an event reference opens for the page's user: evidence; a checkpoint's page
    for an approver, else the run's checkpoint list (everyone reads it; it links what the
    user may open); the recovery lookup for an operator, else the run's attempts."""
    roles = roles_of(context.get("user"))
    if ref.kind == "evidence":
        return reverse("runs-evidence", args=[run.pk, ref.value])
    if ref.kind == "checkpoint":
        if APPROVER in roles:
            return reverse("approvals-detail", args=[ref.value])
        return reverse("runs-checkpoints", args=[run.pk])
    if ref.kind in ("attempt", "effect"):
        if OPERATOR in roles:
            return f"{reverse('recovery')}?q={ref.value}"
        return reverse("runs-attempts", args=[run.pk])
    return ""


@register.filter
def duration(value: Any) -> str:
    """Render seconds (or a timedelta) as '2h 05m', '4m 12s' or '9s'; negative as 'ago'."""
    if value is None or value == "":
        return ""
    seconds = int(value.total_seconds() if isinstance(value, dt.timedelta) else value)
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        text = f"{hours}h {minutes:02d}m"
    elif minutes:
        text = f"{minutes}m {secs:02d}s"
    else:
        text = f"{secs}s"
    return f"{sign}{text}"


@register.filter
def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def canonical(value: Any) -> str:
    """The exact canonical JSON a hash is computed over."""
    return canonical_json(value)


@register.filter
def short(value: Any, length: int = 12) -> str:
    text = str(value or "")
    return text[: int(length)]


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter(name="ref_links")
def ref_links_filter(refs: Any) -> tuple[Any, ...]:
    """An event's refs as typed links (see ``runs.console.runs_selectors.ref_links``)."""
    from runs.console.runs_selectors import ref_links

    return ref_links(refs or {})
