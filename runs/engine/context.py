"""The context projection: the bounded, versioned view a policy receives at DECIDING.

Built from canonical state only (stored events and the evidence they reference): the
objective, admitted observations, visible capability projections, non-sensitive budget
hints, and recent denial reasons. It is rebuilt from scratch for every decision, so no
model output and no chat history is ever state: what the model said last turn appears
only through what validation and the capabilities made of it.

Never principal references or credentials: keys that name a principal, an approver or a
credential are dropped, ``user:...`` references and configured secret values are
redacted from every string. Bounded: at most ``MAX_OBSERVATIONS`` observations (the
request is always kept), each at most ``MAX_OBSERVATION_BYTES``, the whole at most
``MAX_PROJECTION_BYTES``. Its hash goes on the proposal.emitted event.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from approvals.domain import CHANGEABLE_FIELDS
from approvals.models import Decision
from fieldops import secrets
from kernel.canonical import canonical_json, digest
from runs import evidence, readcache
from runs.domain.budgets import Budget
from runs.domain.states import EventType
from runs.models import Run

VERSION = "context-projection@2"
MAX_OBSERVATIONS = 12
MAX_DENIALS = 3
MAX_TEXT = 600
MAX_DETAIL = 300
MAX_OBSERVATION_BYTES = 6_000
MAX_PROJECTION_BYTES = 48_000
BUDGET_HINTS = (Budget.TURNS, Budget.ACTIONS, Budget.CORRECTIONS)

# Keys whose values are principal references or credentials: never shown to a model.
SENSITIVE_KEYS = frozenset(
    {
        "principal_ref",
        "principal",
        "requested_by",
        "by",
        "decided_by",
        "decided_by_ref",
        "approver",
        "approver_ref",
        "credential",
        "credential_ref",
        "api_key",
        "authorization",
        "password",
        "secret",
        "token",
    }
)
PRINCIPAL_REF = re.compile(r"\buser:[A-Za-z0-9_.@+-]+")
REDACTED_PRINCIPAL = "[principal]"


def build(run: Run, *, uncharged_turns: int = 0) -> dict[str, Any]:
    """Return the projection for ``run``'s next decision (hash it with ``projection_hash``).

    ``uncharged_turns``: model calls already made whose turn is not yet on the counter
    (their worker died before the proposal was recorded); the turn number and the turn
    hint include them.
    """
    # The run's observations, denials, declined approvals and rejected completions up to
    # the revision it was read at (once per advance and revision: runs/readcache.py).
    recorded = readcache.recorded_events(str(run.pk), run.revision)
    obs_ids = [
        e["refs"].get("observation")
        for e in recorded
        if e["type"] == EventType.OBSERVATION_RECORDED.value
    ]
    contents = evidence.contents(i for i in obs_ids if i)
    observations = []
    for e in recorded:
        if e["type"] != EventType.OBSERVATION_RECORDED.value:
            continue
        ref = e["refs"].get("observation", "")
        content = contents.get(ref)
        if content is None:
            continue
        # Every decision of an advance shows the earlier observations again: each is made
        # once per advance from its immutable evidence.
        observations.append(
            readcache.derived(
                ("context.observation", str(run.pk), run.principal_ref, ref, e["sequence"]),
                functools.partial(_observation, ref, e["sequence"], content, run),
            )
        )
    denials = [
        {"seq": e["sequence"], "reason": _denial_reason(e), "detail": _denial_detail(e)}
        for e in recorded
        if e["type"] != EventType.OBSERVATION_RECORDED.value
    ]
    limits = run.budget_limits
    counters = {**run.counters, Budget.TURNS: run.counters.get(Budget.TURNS, 0) + uncharged_turns}
    projection: dict[str, Any] = {
        "version": VERSION,
        "objective": _scrub(run.objective, run),
        "turn": counters.get(Budget.TURNS, 0) + 1,
        "observations": observations,
        "omitted_observations": 0,
        "capabilities": visible_capabilities(run),
        "budget_hints": {
            b.value: max(0, limits.get(b, 0) - counters.get(b, 0)) for b in BUDGET_HINTS
        },
        "recent_denials": _scrub(denials[-MAX_DENIALS:], run),
        "denial_counts": dict(sorted(Counter(d["reason"] for d in denials).items())),
        "requested_change": _requested_change(run, recorded),
    }
    _fit(projection)
    return projection


def _observation(ref: str, seq: int, content: Mapping[str, Any], run: Run) -> Any:
    observation = {
        "ref": ref,
        "seq": seq,
        "capability": content.get("capability", ""),
        "ok": bool(content.get("ok")),
        "error": content.get("error", ""),
        "detail": str(content.get("detail", ""))[:MAX_DETAIL],
        "data": _bounded(content.get("data", {})),
    }
    return _scrub(observation, run)


def _fit(projection: dict[str, Any]) -> None:
    """Drop the oldest observations (never the request) until the projection is in bounds."""
    observations: list[dict[str, Any]] = projection["observations"]
    keep_first = bool(observations) and observations[0]["capability"] == "request"
    floor = 1 if keep_first else 0

    def too_big() -> bool:
        return len(observations) > MAX_OBSERVATIONS or _size(projection) > MAX_PROJECTION_BYTES

    while too_big() and len(observations) > floor:
        del observations[floor]
        projection["omitted_observations"] += 1


def _size(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True, default=str))


def _scrub(value: Any, run: Run) -> Any:
    """Drop sensitive keys; redact principal references and secret values from strings."""
    return _scrubbed(value, run, secrets.redactor())


def _scrubbed(value: Any, run: Run, redact: Callable[[str], str]) -> Any:
    if isinstance(value, Mapping):
        return {
            str(k): _scrubbed(v, run, redact)
            for k, v in value.items()
            if str(k).lower() not in SENSITIVE_KEYS
        }
    if isinstance(value, (list, tuple)):
        return [_scrubbed(v, run, redact) for v in value]
    if isinstance(value, str):
        text = redact(value)
        if run.principal_ref:
            text = text.replace(run.principal_ref, REDACTED_PRINCIPAL)
        return PRINCIPAL_REF.sub(REDACTED_PRINCIPAL, text)
    return value


def _bounded(data: Any) -> Any:
    """Return ``data`` within ``MAX_OBSERVATION_BYTES``: long texts cut, else a marker."""
    if _size(data) <= MAX_OBSERVATION_BYTES:
        return data
    cut = _cut_texts(data)
    if _size(cut) <= MAX_OBSERVATION_BYTES:
        return cut
    return {"omitted": "observation too large for the context", "digest": digest({"d": data})}


def _cut_texts(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _cut_texts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_texts(v) for v in value]
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return value[:MAX_TEXT] + " [cut]"
    return value


def _denial_reason(e: Mapping[str, Any]) -> str:
    if e["type"] == EventType.APPROVAL_DECLINED.value:
        return "approval_declined"
    if e["type"] == EventType.COMPLETION_REJECTED.value:
        return "completion_rejected"
    return str(e["reason_code"])


def _denial_detail(e: Mapping[str, Any]) -> str:
    payload = e.get("payload") or {}
    detail = payload.get("detail") or payload.get("reason") or ""
    if isinstance(payload.get("reasons"), list):
        detail = "; ".join(payload["reasons"])
    return str(detail)[:MAX_DETAIL]


def _requested_change(run: Run, recorded: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The fields the last declining reviewer asked to change (and only those fields).

    A declining decision is stored in the transaction of its ``approval.declined`` event,
    so a run whose recorded history (``recorded``, at the revision the projection is built
    at) holds none has none to read."""
    if not any(e["type"] == EventType.APPROVAL_DECLINED.value for e in recorded):
        return {}
    decision = (
        Decision.objects.filter(checkpoint__run=run, verdict=Decision.Verdict.DECLINE)
        .order_by("-created_at")
        .first()
    )
    if decision is None or not decision.requested_change:
        return {}
    return {k: v for k, v in decision.requested_change.items() if k in CHANGEABLE_FIELDS}


def visible_capabilities(run: Run) -> list[dict[str, Any]]:
    """Model projections of the capabilities visible at this decision, sorted by id.

    Only admitted, non-retired versions the run pinned, narrowed by the exposure policy of
    the run's phase and top-k retrieval; trusted controls always (runs.engine.visibility).
    A capability whose id a provider would refuse as a tool name (an imported MCP tool's
    ``files.read_text``) carries the name requests offer it under, ``tool_name``
    (runs.policies.tool_names); the others are exactly their model projection.
    """
    from runs.engine import visibility
    from runs.policies import tool_names

    return tool_names.named(visibility.visible_projections(run))


def projection_hash(projection: Mapping[str, Any]) -> str:
    return digest(dict(projection))


def projection_text(projection: Mapping[str, Any]) -> str:
    """The canonical JSON of ``projection``: what ``projection_hash`` hashes."""
    return canonical_json(dict(projection))


def text_hash(text: str) -> str:
    """``projection_hash`` of the projection whose ``projection_text`` is ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
