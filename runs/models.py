"""Runs, their immutable events, evidence, waits, effect attempts and terminal records.

Only ``runs.authority`` writes ``Run.state``/``revision`` and appends ``Event`` rows.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models.functions import Cast, Left

from kernel.principals import PRINCIPAL_REF_MAX
from runs.domain import effects
from runs.domain.effects import AttemptStatus
from runs.domain.states import CONTROL_EVENTS, REJECTION_EVENTS, State

STATE_CHOICES = [(s.value, s.value) for s in State]

# The timeline's kinds as stored type lists, sorted: partial indexes are defined with these
# exact lists and the queries filter with the same ones (SQLite uses a partial index only
# when the query's condition is the index's, term for term; a set's order would vary).
CONTROL_TYPES = tuple(sorted(e.value for e in CONTROL_EVENTS))
REJECTED_TYPES = tuple(sorted(e.value for e in REJECTION_EVENTS))
# The event types and reason codes that show an incident a runbook answers (each runbook's
# ``signs`` in runs/runbooks.py; a test holds the two equal), sorted. The run page finds
# its runbooks through the partial index of these few rows (``event_run_runbook_sign``),
# never by reading the run's whole history.
RUNBOOK_SIGNS = (
    "MALFORMED_RESULT",
    "SAME_KEY_DIFFERENT_INTENT",
    "STALE",
    "cancelled_effect_unknown",
    "effect.ambiguous",
    "evidence_stale",
    "ledger_unavailable",
    "reconciliation.conflict",
    "repeated_denial",
    "retry_budget_exhausted",
)
# Effect attempts whose outcome is not known yet (the run page counts a run's), sorted.
UNRESOLVED_STATUSES = tuple(sorted(s.value for s in effects.UNRESOLVED))

# A run id's first hex digits (the same text on PostgreSQL's dashed form and SQLite's hex),
# indexed with the creation order: an id-prefix search of the runs list seeks to them.
ID_PREFIX_DIGITS = 3


def id_prefix() -> Left:
    """The expression ``run_tenant_live_id_prefix`` indexes: the id's first digits."""
    return Left(Cast("id", output_field=models.TextField()), ID_PREFIX_DIGITS)


# Reason codes the incident runbooks look up across runs; a partial index keeps those
# lookups fast at millions of events without indexing every ordinary event.
INCIDENT_REASONS = (
    "MALFORMED_RESULT",
    "STALE",
    "CONFLICT",
    "evidence_stale",
    "repeated_denial",
    "retry_budget_exhausted",
    "scope_denied",
    "ledger_unavailable",
    "same_key_different_intent",
    "TIMEOUT_AMBIGUOUS",
)


class Run(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    task_id = models.CharField(max_length=64)
    scenario = models.CharField(max_length=64)
    objective = models.CharField(max_length=500)
    # Immutable configuration (the initial run record).
    contract_version = models.CharField(max_length=64)
    policy_version = models.CharField(max_length=64)
    model_adapter_version = models.CharField(max_length=64)
    component_set = models.CharField(max_length=64)
    components = models.JSONField(default=dict)
    tenant = models.CharField(max_length=32)
    # The capability contracts carry it to every tool (``principal_ref``, at most 64).
    principal_ref = models.CharField(max_length=64)
    scope = models.JSONField(default=list)
    limits = models.JSONField(default=dict)  # as configured at creation (immutable)
    deadline = models.DateTimeField()
    created_at = models.DateTimeField()
    fault_plan = models.JSONField(default=list, blank=True)
    namespace = models.CharField(max_length=64, default="live")
    # Indexed by ``run_follows_created`` (follow-ups of a run, newest first), not alone.
    follows_run = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="follow_ups",
        db_index=False,
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Current state: derivable by folding events; written only by the authority.
    state = models.CharField(max_length=20, choices=STATE_CHOICES, default=State.CREATED.value)
    revision = models.PositiveIntegerField(default=0)
    attempt = models.PositiveIntegerField(default=1)
    owner_epoch = models.PositiveIntegerField(default=0)
    counters = models.JSONField(default=dict)
    budget_limits = models.JSONField(default=dict)  # current limits (budget.changed)
    cancel_revision = models.PositiveIntegerField(default=0)
    last_hash = models.CharField(max_length=64)
    disposition = models.CharField(max_length=16, blank=True, default="")
    terminal_reason = models.CharField(max_length=80, blank=True, default="")
    waiting_checkpoint = models.CharField(max_length=64, blank=True, default="")
    waiting_correlation = models.CharField(max_length=64, blank=True, default="")
    current_proposal = models.CharField(max_length=64, blank=True, default="")
    pending_observation = models.CharField(max_length=64, blank=True, default="")
    event_bytes = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField()
    # Ownership lease (operational metadata, not run state).
    lease_owner = models.CharField(max_length=128, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["tenant", "-created_at", "-id"], name="run_tenant_created"),
            models.Index(fields=["tenant", "state", "-created_at", "-id"], name="run_tenant_state"),
            models.Index(
                fields=["tenant", "disposition", "-created_at", "-id"], name="run_tenant_disp"
            ),
            models.Index(
                fields=["tenant", "scenario", "-created_at", "-id"], name="run_tenant_scenario"
            ),
            models.Index(fields=["state", "lease_expires_at"], name="run_state_lease"),
            # The runs list shows the live world by default: its first page must not walk
            # past fault-lab runs and simulations to find live ones.
            models.Index(
                fields=["tenant", "-created_at", "-id"],
                condition=models.Q(namespace="live"),
                name="run_tenant_live_created",
            ),
            # The runs list searched by an id prefix, newest first: ids are random, so a
            # prefix's runs are spread over the whole creation order, and neither the
            # primary key (every match read, then sorted) nor the creation order (every
            # run read until a page of matches is found) serves a prefix of a few digits
            # at millions of runs. Seeking to the first digits in creation order does: a
            # page reads its own rows (three digits), or 16x them per digit more (the
            # primary key takes over from four digits on, where matches are few).
            models.Index(
                models.F("tenant"),
                id_prefix(),
                models.F("created_at").desc(),
                models.F("id").desc(),
                condition=models.Q(namespace="live"),
                name="run_tenant_live_id_prefix",
            ),
            # A run's follow-ups, newest first, a page at a time (the run page shows the
            # latest few); partial: most runs follow none, and every index entry of this
            # table is rewritten when a transition moves the run.
            models.Index(
                fields=["follows_run", "-created_at", "-id"],
                condition=models.Q(follows_run__isnull=False),
                name="run_follows_created",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.state}"

    @property
    def run_id(self) -> str:
        return str(self.pk)

    @property
    def short_id(self) -> str:
        return str(self.pk)[:8]

    @property
    def is_terminal(self) -> bool:
        return bool(self.disposition)

    @property
    def can_cancel(self) -> bool:
        return not self.is_terminal


class Event(models.Model):
    """One immutable, hash-linked fact about a run. Never updated or deleted."""

    id = models.BigAutoField(primary_key=True)
    event_id = models.UUIDField(unique=True)
    # Served by ``event_run_sequence`` (run, sequence): an index on run alone is redundant.
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="events", db_index=False)
    sequence = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    owner_epoch = models.PositiveIntegerField()
    type = models.CharField(max_length=48)
    actor = models.CharField(max_length=24)
    prev_state = models.CharField(max_length=20)
    next_state = models.CharField(max_length=20)
    contract_version = models.CharField(max_length=64)
    policy_version = models.CharField(max_length=64)
    component_set = models.CharField(max_length=64)
    budget = models.JSONField()
    cancel_revision = models.PositiveIntegerField()
    reason_code = models.CharField(max_length=80, blank=True)
    refs = models.JSONField()
    payload = models.JSONField()
    occurred_at = models.CharField(max_length=40)
    schema_version = models.PositiveSmallIntegerField()
    prev_hash = models.CharField(max_length=64)
    content_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "sequence"], name="event_run_sequence"),
        ]
        indexes = [
            models.Index(
                fields=["reason_code", "-id"],
                name="event_incident_reason",
                condition=models.Q(reason_code__in=INCIDENT_REASONS),
            ),
            # The timeline's kind filters page a run's events of one kind by sequence: each
            # kind has its own (run, sequence) index, so a page reads its own rows only,
            # however rare the kind is in a long history. Control and rejected events are
            # few (partial indexes of a few rows); the transitions index takes the place
            # of an index on run alone.
            models.Index(
                fields=["run", "sequence"],
                name="event_run_transition",
                condition=~models.Q(type__in=CONTROL_TYPES),
            ),
            models.Index(
                fields=["run", "sequence"],
                name="event_run_control",
                condition=models.Q(type__in=CONTROL_TYPES),
            ),
            models.Index(
                fields=["run", "sequence"],
                name="event_run_rejected",
                condition=models.Q(type__in=REJECTED_TYPES),
            ),
            # The few events that show a runbook's incident (``RUNBOOK_SIGNS``).
            models.Index(
                fields=["run", "sequence"],
                name="event_run_runbook_sign",
                condition=models.Q(type__in=RUNBOOK_SIGNS)
                | models.Q(reason_code__in=RUNBOOK_SIGNS),
            ),
            # Reconciliations recorded after a run ended (its effect account counts them).
            models.Index(
                fields=["run", "sequence"],
                name="event_run_reconciled",
                condition=models.Q(type="effect.reconciled"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.sequence} {self.type}"


class Evidence(models.Model):
    """Large or sensitive payloads live here and are referenced from events by id."""

    KINDS = [
        "request",
        "observation",
        "raw_output",
        "proposal",
        "validation",
        "canonical_proposal",
        "assessment",
        "artifact",
        "callback",
        "quarantine",
        "context",
        "answer",
        "commentary",
    ]

    id = models.CharField(primary_key=True, max_length=40)
    # Looked up by run through the (run, kind) index: a second index on run alone would
    # only cost each insert (a run writes ~20 evidence rows).
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="evidence", db_index=False)
    kind = models.CharField(max_length=24, choices=[(k, k) for k in KINDS])
    content = models.JSONField()
    content_hash = models.CharField(max_length=64)
    redaction_class = models.CharField(max_length=24, default="internal")
    size = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["run", "kind"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk}"


class EffectAttempt(models.Model):
    """The dispatch record of one reserve_part attempt (written before the call).

    Its status follows the effect attempt lifecycle of ``runs/domain/effects.py`` and only
    moves together with the run event that records the move.
    """

    Status = models.TextChoices("Status", [(s.value, s.value) for s in AttemptStatus])

    id = models.CharField(primary_key=True, max_length=40)
    # Indexed by ``attempt_run_created`` (a run's attempts in order), not alone.
    run = models.ForeignKey(
        Run, on_delete=models.PROTECT, related_name="effect_attempts", db_index=False
    )
    idempotency_key = models.CharField(max_length=64, db_index=True)
    proposal_hash = models.CharField(max_length=64)
    checkpoint_id = models.CharField(max_length=64, blank=True, default="")
    attempt = models.PositiveIntegerField()
    owner_epoch = models.PositiveIntegerField()
    # The sequence of the proposal.allowed event that recorded this dispatch; it is also
    # the dispatch's fencing token at the ledger.
    dispatch_sequence = models.PositiveIntegerField()
    status = models.CharField(max_length=24, choices=Status.choices)
    error = models.CharField(max_length=48, blank=True, default="")
    # The definite answer the service gave after the request may have reached it (e.g.
    # CONFLICT); kept when reconciliation later proves absence, so the unchanged request
    # is not sent again.
    answer = models.CharField(max_length=48, blank=True, default="")
    effect_id = models.CharField(max_length=40, blank=True, default="")
    detail = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # A run's attempts, newest first, a page at a time (the run page shows the
            # latest few and links the rest).
            models.Index(fields=["run", "-created_at", "-id"], name="attempt_run_created"),
            # A run's attempts with an unknown outcome (the run page counts them): few,
            # so counting them reads only them, whatever the run's number of attempts.
            models.Index(
                fields=["run"],
                name="attempt_run_unresolved",
                condition=models.Q(status__in=UNRESOLVED_STATUSES),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pk} {self.status}"

    @property
    def unresolved(self) -> bool:
        return self.status in effects.UNRESOLVED

    @property
    def meaning(self) -> str:
        return effects.MEANING[AttemptStatus(self.status)]


class Correlation(models.Model):
    """What a WAITING_EXTERNAL run expects, and from whom (SPEC §1 Waits)."""

    id = models.CharField(primary_key=True, max_length=40)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="correlations")
    attempt = models.PositiveIntegerField()
    owner_epoch = models.PositiveIntegerField()
    dispatch_sequence = models.PositiveIntegerField()
    expected_response_type = models.CharField(max_length=64)
    deadline = models.DateTimeField()
    allowed_states = models.JSONField(default=list)
    status = models.CharField(max_length=16, default="OPEN")
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.pk} {self.expected_response_type} {self.status}"


class CallbackReceipt(models.Model):
    """Every callback that reached the endpoint, whatever became of it."""

    delivery_id = models.CharField(max_length=64, unique=True)
    correlation_id = models.CharField(max_length=40, blank=True, default="")
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.PROTECT, related_name="callbacks"
    )
    outcome = models.CharField(max_length=32)
    payload_digest = models.CharField(max_length=64)
    received_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.delivery_id} {self.outcome}"


class RunStartKey(models.Model):
    """The key a start request carried (the start form's one-time key, the API's
    ``Idempotency-Key``): a second request with the same key from the same principal finds
    the run the first one started instead of starting another (a double click, a client's
    retry after a lost response). ``request_digest`` is the digest of what was asked, so a
    key reused for a different request is refused, not answered with the wrong run."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.CharField(max_length=32)
    principal_ref = models.CharField(max_length=64)
    key = models.CharField(max_length=64)
    request_digest = models.CharField(max_length=64)
    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="start_key")
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "principal_ref", "key"], name="run_start_key_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.principal_ref} {self.key} -> {self.run_id}"


class CapabilityUse(models.Model):
    """A capability a run called: the first ``proposal.allowed`` event that admitted a call
    of it. A projection of the events (one row per run and capability, never changed),
    written by the authority in that event's own statement, so it is never ahead of or
    behind its event. It serves the runs list's capability filter: its listing index
    orders a capability's runs by their creation, as the list does, so a page of runs
    that called one capability is a seek however rare or common the capability is."""

    id = models.BigAutoField(primary_key=True)
    # Served by ``capability_use_run`` (run, capability): no index on run alone.
    run = models.ForeignKey(
        Run, on_delete=models.PROTECT, related_name="capability_uses", db_index=False
    )
    capability_id = models.CharField(max_length=64)
    # The run's tenant and creation time, copied so the listing index can narrow and order
    # by them (a run's are fixed at creation).
    tenant = models.CharField(max_length=32)
    run_created_at = models.DateTimeField()
    first_sequence = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "capability_id"], name="capability_use_run"),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "capability_id", "-run_created_at", "-run"],
                name="capability_use_listing",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} called {self.capability_id}"


class TerminalRecord(models.Model):
    """Exactly one per terminal run; never edited (corrections are appended as events)."""

    run = models.OneToOneField(Run, on_delete=models.PROTECT, related_name="terminal_record")
    disposition = models.CharField(max_length=16)
    reason_code = models.CharField(max_length=80)
    deciding_sequence = models.PositiveIntegerField()
    versions = models.JSONField()
    final_counters = models.JSONField()
    cancel_revision = models.PositiveIntegerField()
    unresolved = models.JSONField(default=list)
    evidence_complete = models.BooleanField(default=True)
    owner = models.CharField(max_length=64)
    allowed_follow_up = models.JSONField(default=list)
    artifact_id = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.disposition} {self.reason_code}"


class Outbox(models.Model):
    """Follow-up work committed with the transition that needs it; a sweeper re-drives it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=24, default="advance")
    created_at = models.DateTimeField()
    dispatched_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["dispatched_at", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.run_id}"


class WorkerHeartbeat(models.Model):
    # Roles: a worker process; the sweeper's last sweep; when a sweeper (beat, the embedded
    # server's thread) last started, so a fresh start reads as starting, not silent, until
    # its first sweep is due (``recovery_selectors.sweeper_report``).
    SWEEPER = "sweeper"
    SWEEPER_START = "sweeper_start"
    SWEEPER_ROLES = (SWEEPER, SWEEPER_START)

    worker = models.CharField(primary_key=True, max_length=128)
    seen_at = models.DateTimeField()
    pid = models.PositiveIntegerField(default=0)
    role = models.CharField(max_length=16, default="worker")

    def __str__(self) -> str:
        return f"{self.worker} {self.seen_at}"


class FaultLabResult(models.Model):
    """The latest outcome of each fault-lab fixture run from the console (one row each)."""

    fixture = models.CharField(primary_key=True, max_length=64)
    injects = models.CharField(max_length=300, blank=True, default="")
    expected = models.CharField(max_length=120)
    actual = models.CharField(max_length=120)
    passed = models.BooleanField()
    run_id = models.CharField(max_length=64, blank=True, default="")
    failed_checks = models.JSONField(default=list)
    notes = models.JSONField(default=list)
    # A fixture that rolls back its run (a live catalog change must not outlive it) keeps
    # what the run did here instead of a run id: {run_id, state, reason, events: [...]}.
    history = models.JSONField(default=dict, blank=True)
    ran_by = models.CharField(max_length=PRINCIPAL_REF_MAX)
    ran_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.fixture} {'PASS' if self.passed else 'FAIL'}"
