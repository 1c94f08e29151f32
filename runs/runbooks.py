"""Incident runbooks of the capability chapter ("Operate a capability failure"), as data.

Each step names the live data blocks it needs (computed by
``runs.console.runbook_selectors.runbook_blocks``) and the actions it allows; the console
renders them. The procedures come from the
capability chapter's response procedure and its worked diagnoses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runs.domain.validation import OWNER_DENIALS, REPEATED_DENIAL_LIMIT


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    data: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Runbook:
    slug: str
    title: str
    alert: str
    summary: str
    steps: tuple[Step, ...]
    fixtures: tuple[str, ...] = ()
    # What on a run's record shows it is in this runbook's incident: the event types and
    # reason codes its events carry (the run page links the runbook when one is there).
    signs: tuple[str, ...] = ()

    @property
    def blocks(self) -> tuple[str, ...]:
        seen: list[str] = []
        for step in self.steps:
            seen += [d for d in step.data if d not in seen]
        return tuple(seen)


# Actions a step may allow (rendered as forms that post to the named console action).
ACTIONS: Mapping[str, str] = {
    "gate": "Close or open the effect gate of a capability version (runbooks-gate)",
    "cancel": "Cancel the selected runs with one reason (runs-bulk-cancel)",
    "reconcile": "Reconcile an attempt against the ledger (recovery-reconcile)",
    "lookup": "Look up the ledger by idempotency key (recovery)",
    "faultlab": "Replay the failure and its neighbours in the fault lab (faultlab)",
    "rediscover": "Discover the tool server again and review candidates (catalog-servers)",
}

# What of a runbook is a catalog admin's (SPEC: they review catalog entries): the drift
# data and re-discovery. They read every runbook; the other blocks and actions are an
# operator's, and the console shows them to operators only.
CATALOG_ADMIN_BLOCKS = frozenset({"tool_drift"})
CATALOG_ADMIN_ACTIONS = frozenset({"rediscover"})

_GATE = Step(
    "Stop new effect dispatch",
    "Close your tenant's effect gate of the affected capability version. Your tenant's new "
    "reservations are denied at validation step 8 (tenant_effect_gate_closed), and one "
    "already allowed but not yet sending is not sent; other tenants, reads and proposals "
    "continue, and attempts already sending keep their reconciliation obligation. The "
    "deployment gate (every tenant) is a catalog admin's, on the contract page.",
    data=("effect_gates",),
    actions=("gate",),
)
_REOPEN = Step(
    "Open the effect gate again",
    "Once the ledger answers and the step above lists no unresolved attempt, go back to the "
    "gate step: the row of the version you closed now shows Open gate; press it with a "
    "reason, and your tenant's new reservations are allowed again. While an obligation is "
    "still unresolved, leave it closed.",
)
_CLASSIFY = Step(
    "List in-flight intents and classify each",
    "Use effect identity, not tool-call count: one intent is one idempotency key, however "
    "many spans or retries it produced. Each is not dispatched, rejected, confirmed, "
    "ambiguous or conflicting; the ledger column is the authoritative outcome.",
    data=("intents",),
    actions=("lookup",),
)
_CANCEL_OWNERS = Step(
    "Cancel current ownership and deny stale dispatch",
    "Cancel the runs that still own an attempt. Cancellation is checked immediately before "
    "effect dispatch; a stale owner's later writes are rejected by the epoch fence.",
    data=("owning_runs",),
    actions=("cancel",),
)
_RECONCILE = Step(
    "Enumerate keys and their authoritative outcomes",
    "Reconcile every unknown attempt against the ledger by its key. Never retry blindly "
    "and never mint a second key: a match records the original effect once, proven absence "
    "allows full revalidation, a conflict escalates. A conflict is final: it stays listed as "
    "an integrity failure with no reconcile button, and reconciling cannot settle it (next "
    "step). An attempt of a run still active is refused (its owner reconciles it): cancel "
    "that run at the step above first.",
    data=("unresolved_attempts",),
    actions=("reconcile",),
)
_REPLAY = Step(
    "Replay the exact failure and its neighbours",
    "Run the fault fixtures that reproduce this failure; each must reach its declared "
    "disposition before the capability is re-released at a smaller effect ceiling or retired.",
    data=("fixtures",),
    actions=("faultlab",),
)

RUNBOOKS: tuple[Runbook, ...] = (
    Runbook(
        "repeated-reservation-attempts",
        "Repeated reservation attempts",
        "An alert reports several reservation attempts for one part or run.",
        "Stop new effect dispatch first, then count intents by effect identity and resolve "
        "each against the ledger before anything is released again.",
        (
            _GATE,
            _CLASSIFY,
            _CANCEL_OWNERS,
            _RECONCILE,
            Step(
                "Freeze blind retry; authorize compensation separately",
                "No compensation exists in v1: a release needs its own contract and authority. "
                "Identify whether selection, validation, retry, service or evidence failed. "
                "For a conflict (the ledger holds the key with another intent), never overwrite "
                "the ledger or reinterpret the key: open its run, compare the intent it "
                "approved with the ledger record (its key's lookup) and keep the run escalated. "
                "Then mark the conflict reviewed with what you found: it leaves the open "
                "obligations and stays on its run and under Recovery's reviewed conflicts.",
                data=("unresolved_attempts",),
            ),
            _REPLAY,
        ),
        ("repeated_effect", "ambiguous_effect", "same_key_different_intent"),
        signs=("reconciliation.conflict", "SAME_KEY_DIFFERENT_INTENT"),
    ),
    Runbook(
        "ambiguous-effect",
        "Ambiguous effect",
        "A reservation timed out after it may have been dispatched (effect.ambiguous).",
        "The outcome is unknown, not failed. Query the ledger by the same key; record what "
        "it proves; escalate when it cannot answer.",
        (
            Step(
                "Find the runs with unknown effects",
                "A run in RECOVERING reconciles when a worker takes it; an ended run keeps the "
                "obligation and the sweeper reconciles it by the same key. To settle one now: "
                "Re-drive reconciliation hands a run still in RECOVERING to a worker again; "
                "Reconcile with ledger settles an ended run's attempt by its key. A conflict "
                "is final (an integrity failure, not an unknown): follow the repeated "
                "reservation attempts runbook for it.",
                data=("unresolved_attempts",),
                actions=("reconcile",),
            ),
            Step(
                "Look up the ledger by the attempt's key",
                "The ledger is authoritative: same key and same intent is the original effect; "
                "same key and a different intent is an integrity failure.",
                data=("intents",),
                actions=("lookup",),
            ),
            _REPLAY,
        ),
        ("ambiguous_effect", "cancel_after_effect_dispatch", "ledger_outage"),
        signs=("effect.ambiguous", "cancelled_effect_unknown"),
    ),
    Runbook(
        "malformed-success",
        "Malformed success",
        "The service answered success without a commit time or semantic key.",
        "The adapter refuses the response and quarantines it; the run does not trust it: it "
        "goes to RECOVERING and finds the effect by a controlled ledger query by the same key "
        "(reconciliation.matched records the original effect once). Only when that query "
        "cannot answer does an attempt stay unresolved for you. Fix the contract drift and "
        "any early completion claim; prompt changes fix neither.",
        (
            Step(
                "See the refused responses",
                "Each MALFORMED_RESULT is quarantined evidence (open it from the run); "
                "nothing from it entered the model context.",
                data=("malformed",),
            ),
            Step(
                "Resolve the effect by a controlled query",
                "The run has already asked the ledger by the attempt's key (its timeline shows "
                "reconciliation.matched); an attempt is listed here only when the ledger could "
                "not answer: reconcile it against the ledger, never trust the response.",
                data=("unresolved_attempts",),
                actions=("reconcile", "lookup"),
            ),
            _GATE,
            _REPLAY,
        ),
        ("malformed_result", "cross_tenant_result"),
        signs=("MALFORMED_RESULT",),
    ),
    Runbook(
        "stale-availability",
        "Stale availability",
        "A reservation was refused because inventory changed after the proposal.",
        "The read was fresh at proposal and aged out while waiting for approval. The adapter "
        "revalidates at dispatch and returns STALE or CONFLICT without consuming effect "
        "authority; it never substitutes another slot (that is a new proposal and approval).",
        (
            Step(
                "Stale refusals",
                "Denials at revalidation (evidence_stale) and typed STALE/CONFLICT rejections.",
                data=("stale_denials",),
            ),
            Step(
                "Approvals waiting on evidence that is already stale",
                "An approver of your tenant decides these, not an operator: ask one (the "
                "approvals queue) to decline with a requested change. An approval is refused "
                "at dispatch (evidence_stale); the run then re-reads inventory and asks again "
                "with a new proposal. Left undecided, the checkpoint expires and the run "
                "escalates (checkpoint_expired). An operator may cancel the run from its page "
                "if the reservation is no longer wanted.",
                data=("stale_checkpoints",),
            ),
            _REPLAY,
        ),
        ("stale_read", "stale_at_dispatch"),
        signs=("evidence_stale", "STALE"),
    ),
    Runbook(
        "repeated-denial",
        "Repeated denial",
        "A run keeps proposing an effect or read that is denied for a reason only an owner "
        "can change: scope, authority, a closed effect gate, a retired version.",
        "Enforcement works, but the retries waste turns and look like approval shopping. The "
        f"rule: an unchanged request denied {REPEATED_DENIAL_LIMIT} times for the same owner "
        f"reason ({', '.join(sorted(OWNER_DENIALS))}) escalates the run with repeated_denial; "
        "a denied effect is containment, not quality. Denials a model can correct (schema, "
        "unknown or not exposed capability) end by their budgets instead.",
        (
            Step(
                "Runs escalated for repeated denial",
                "Each ended with escalation.admitted; the denials before it show what was asked.",
                data=("repeated_denials",),
            ),
            Step(
                "Scope denials",
                "Recent proposal.denied events for scope; their proposals are evidence.",
                data=("scope_denials",),
            ),
            Step(
                "Cancel runs still retrying",
                "Runs that are still active and hold attempts can be cancelled with a reason.",
                data=("owning_runs",),
                actions=("cancel",),
            ),
            _REPLAY,
        ),
        (
            "denied_scope",
            "repeated_denial_escalates",
            "tenant_gate_closed",
            "unavailable_tool_loop",
        ),
        signs=("repeated_denial", "retry_budget_exhausted"),
    ),
    Runbook(
        "ledger-outage",
        "Ledger outage",
        "Reconciliation cannot reach the effect ledger (reconciliation.unresolved).",
        "Stay honest: runs escalate with the effect budget still reserved and the obligation "
        "kept. Stop new dispatch while the ledger is down, then reconcile each obligation "
        "once it answers.",
        (
            Step(
                "Runs that could not reconcile",
                "reconciliation.unresolved with ledger_unavailable.",
                data=("ledger_outage",),
            ),
            _GATE,
            Step(
                "Reconcile once the ledger answers",
                "Each reconciliation is recorded as effect.reconciled on the ended run.",
                data=("unresolved_attempts",),
                actions=("reconcile",),
            ),
            _REOPEN,
            _REPLAY,
        ),
        ("ledger_outage", "ambiguous_effect"),
        signs=("ledger_unavailable",),
    ),
    Runbook(
        "tool-definition-drift",
        "Tool definition changed under an admitted mapping",
        "A re-discovery (scheduled or on demand) found that a tool server changed, dropped or "
        "broke a tool whose earlier definition was admitted.",
        "The server, not the catalog, changed. The earlier mapping is already paused "
        "(DEPRECATED: no new run pins it); the changed definition is a new DISCOVERED candidate "
        "with no admission. Compare the two, stop effects if the mapped contract is one, and "
        "have a second catalog admin review the new candidate on its own.",
        (
            Step(
                "See what drifted and which mappings were paused",
                "Each row names the server, the tool, the earlier and the new definition and the "
                "admitted mapping the drift paused. Open the side-by-side diff: description, input "
                "and output schema, annotations (untrusted hints) and execution.",
                data=("tool_drift",),
            ),
            _GATE,
            Step(
                "Review the new definition on its own",
                "The new candidate never inherits the old admission. A catalog admin who did not "
                "import it maps it to a reviewed local contract (admit), defers or rejects it; "
                "then marks the drift reviewed with a reason. Re-discover the server to confirm "
                "what it serves now.",
                data=("tool_drift",),
                actions=("rediscover",),
            ),
        ),
    ),
)

BY_SLUG: Mapping[str, Runbook] = {r.slug: r for r in RUNBOOKS}

# Headings of the event-list blocks (the other blocks have their own layout).
BLOCK_TITLES: Mapping[str, str] = {
    "malformed": "Refused malformed results (MALFORMED_RESULT, quarantined)",
    "stale_denials": "Stale refusals (evidence_stale, STALE, CONFLICT)",
    "repeated_denials": "Runs escalated for repeated denial",
    "scope_denials": "Scope denials (scope_denied)",
    "ledger_outage": "Reconciliations the ledger could not answer (ledger_unavailable)",
    "tool_drift": "Tool definition drift (open)",
}


@dataclass(frozen=True)
class FixtureInfo:
    """A fault-lab fixture a runbook points to, as the fault lab describes it."""

    name: str
    injects: str = ""
    expect_state: str = ""
    expect_reason: str = ""


# Filled by the fault lab when its app is ready (sim.apps); a name it never described is
# shown by name only.
_FIXTURES: dict[str, FixtureInfo] = {}


def register_fixture(info: FixtureInfo) -> None:
    _FIXTURES[info.name] = info


def fixture_info(name: str) -> FixtureInfo:
    return _FIXTURES.get(name, FixtureInfo(name))


def runbooks_with_signs(signs: set[str]) -> tuple[Runbook, ...]:
    """The runbooks of the incidents these event types and reason codes show."""
    return tuple(book for book in RUNBOOKS if signs.intersection(book.signs))


# Every event type and reason code some runbook looks for on a run's record.
ALL_SIGNS: frozenset[str] = frozenset(sign for book in RUNBOOKS for sign in book.signs)
