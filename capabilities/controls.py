"""The three trusted control outcomes: always visible from local configuration, never
consuming the retrieval budget, never touching the world (effect class: none)."""

from __future__ import annotations

from capabilities import common
from capabilities.contracts import Contract, EffectClass, ErrorCode, ErrorRule, ProposalKind
from capabilities.contracts import Provenance as P


def _control(
    cid: str,
    intent: str,
    properties: dict[str, dict[str, object]],
    use_when: tuple[str, ...],
    avoid_when: tuple[str, ...],
    event: str,
) -> Contract:
    return Contract(
        id=cid,
        version="1.0.0",
        family="control",
        kind=ProposalKind.CONTROL,
        intent=intent,
        non_intents=("any effect on the world", "any change of authority"),
        effect_class=EffectClass.NONE,
        operational_effects=(),
        use_when=use_when,
        avoid_when=avoid_when,
        input_schema={
            "type": "object",
            "properties": properties,
            "required": sorted(properties),
            "additionalProperties": False,
        },
        output_schema={"type": "object", "properties": {}, "additionalProperties": False},
        provenance={name: P.MODEL for name in properties},
        preconditions=(),
        scope={
            "principal": "run principal",
            "audience": "local harness",
            "resource": "the run itself",
            "tenant_bound": False,
        },
        freshness={},
        timeout_stages=(),
        errors=(
            ErrorRule(
                ErrorCode.INVALID_ARGUMENT, "malformed control outcome", 0, "proposal.denied"
            ),
        ),
        idempotency={
            "supported": True,
            "key_fields": [],
            "retention_s": 0,
            "duplicate_response": "n/a (no effect)",
        },
        reconciliation={},
        compensation=common.NO_COMPENSATION,
        audit={"before_dispatch": [], "after_dispatch": [event]},
        redaction={},
        double={"name": "harness", "faults": []},
        deprecation=common.DEPRECATION,
        owner="agentic-engineering (trusted local config)",
    )


_TEXT = {"type": "string", "minLength": 1, "maxLength": 500}

ASK_USER = _control(
    "ask_user",
    "Ask the requesting principal for a missing input only they can supply.",
    {"question": _TEXT},
    ("a required user-supplied value is missing",),
    ("the runtime or an available capability can obtain the value",),
    "clarification.required",
)
WAIT_FOR_EVENT = _control(
    "wait_for_event",
    "Pause until a named external event may change a precondition.",
    {"reason": _TEXT, "expected_event": {"type": "string", "pattern": "^[a-z][a-z0-9_.]{2,63}$"}},
    ("progress depends on an external event expected later",),
    ("the block is missing information or a missing capability",),
    "wait.admitted",
)
NO_APPLICABLE_TOOL = _control(
    "no_applicable_tool",
    "Report that no available capability can advance the task.",
    {"reason": _TEXT},
    ("no ordinary capability applies", "asking or waiting would not resolve the block"),
    ("an eligible capability can advance the task",),
    "escalation.admitted",
)

CONTROL_CONTRACTS = (ASK_USER, WAIT_FOR_EVENT, NO_APPLICABLE_TOOL)
