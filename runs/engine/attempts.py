"""Writes of effect attempts: every move is a compare-and-set along the lifecycle of
``runs/domain/effects.py``, made inside the transaction of the run event that records it.
"""

from __future__ import annotations

from typing import Any

from kernel import clock
from runs.authority import Refused
from runs.domain import effects
from runs.domain.effects import AttemptStatus
from runs.models import EffectAttempt


def attempt_move(
    *,
    attempt_id: str,
    source: AttemptStatus,
    target: AttemptStatus,
    detail: str,
    error: str = "",
    answer: str = "",
    effect_id: str = "",
) -> None:
    """Compare-and-set the attempt from ``source`` to ``target`` (call inside the
    transaction of the event that records the move). Raise authority.Refused when the
    attempt is no longer in ``source``: someone else settled it, so the event is not
    written either. ``source`` equal to ``target`` only checks that the status still holds."""
    if source is target:
        # Nothing moves; the event only re-records the status, which must still hold.
        if not EffectAttempt.objects.filter(pk=attempt_id, status=source.value).exists():
            raise Refused("attempt_moved")
        return
    effects.check_move(source, target)
    fields: dict[str, Any] = {
        "status": target.value,
        "detail": detail[:500],
        "resolved_at": None if target in effects.UNRESOLVED else clock.now(),
    }
    if error:
        fields["error"] = error[:48]
    if answer:
        fields["answer"] = answer[:48]
    if effect_id:
        fields["effect_id"] = effect_id
    moved = EffectAttempt.objects.filter(pk=attempt_id, status=source.value).update(**fields)
    if moved != 1:
        raise Refused("attempt_moved")
