"""The engine's safe points (SPEC §1 Cancellation): where a run re-checks cancellation, and
where a run's fault plan may schedule a cancellation (the fault lab's reproducible ones).

Pure module: standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SAFE_POINTS: Mapping[str, str] = {
    "before_model_dispatch": "cancellation arrives just before a policy call",
    "after_model_response": "cancellation arrives while the policy is answering",
    "before_capability_admission": "cancellation arrives before validation admits an action",
    "before_effect_dispatch": "cancellation arrives after the dispatch record, just before "
    "the effect is sent",
    "after_effect_dispatch": "cancellation arrives after the effect may have committed",
    "while_waiting_approval": "cancellation arrives while the run waits for approval",
}


def cancellation_scheduled(fault_plan: Iterable[Mapping[str, Any]], point: str) -> bool:
    """Whether the run's fault plan schedules a cancellation at the safe point ``point``."""
    return point in SAFE_POINTS and any(entry.get("point") == point for entry in fault_plan)
