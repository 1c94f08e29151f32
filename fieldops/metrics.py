"""Prometheus metrics: what the engine counts as it goes, and what the database says now.

Counted in the process that does the work (``fieldops.telemetry`` calls these): transitions
and refusals by type, effect outcomes, lease takeovers, approval wait times, model and tool
calls, sweeps. Read from PostgreSQL at scrape time (``DatabaseCollector``): runs by state, outbox
depth and age, sweeper lag, pending approvals.

Multiprocess-safe: with ``PROMETHEUS_MULTIPROC_DIR`` set (before the process starts; an
empty directory shared by the gunicorn workers and the Celery workers of one host, or one
volume shared by the containers), every process writes its counters there and a scrape of
``/metrics`` on any web worker sums them. Without it, a scrape shows this process only (the
embedded default, where runs advance in the web process). See docs/observability.md.
"""

from __future__ import annotations

import functools
import hmac
import os
import socket
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    values,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

if os.environ.get(MULTIPROC_ENV):
    os.makedirs(os.environ[MULTIPROC_ENV], exist_ok=True)
    # File names carry the process identifier: host and pid, so the containers of one
    # deployment can share a volume without two processes with the same pid colliding.
    values.ValueClass = values.MultiProcessValue(
        process_identifier=lambda: f"{socket.gethostname()}-{os.getpid()}"
    )

TRANSITIONS = Counter(
    "fieldops_transitions",
    "Events appended by the transition authority, by event type and the state after.",
    ["event_type", "state"],
)
REFUSALS = Counter(
    "fieldops_refusals",
    "Appends the authority refused, by reason and the event type that was asked for.",
    ["reason", "attempted"],
)
EFFECT_OUTCOMES = Counter(
    "fieldops_effect_outcomes",
    "Effect attempts settled, by outcome (the settling event type).",
    ["outcome"],
)
LEASE_TAKEOVERS = Counter(
    "fieldops_lease_takeovers",
    "Runs taken over by a new owner after the previous owner's lease expired (or the "
    "owner was found dead on its host).",
)
APPROVAL_WAIT = Histogram(
    "fieldops_approval_wait_seconds",
    "Time from a checkpoint opening to its decision, answer or expiry.",
    ["kind", "decision"],
    buckets=(5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 4 * 3600, 24 * 3600),
)
APPROVAL_DECISIONS = Counter(
    "fieldops_approval_decisions",
    "Decisions offered on checkpoints, by kind, decision and outcome (recorded or refusal).",
    ["kind", "decision", "outcome"],
)
MODEL_CALLS = Counter(
    "fieldops_model_calls",
    "Model (policy) calls, by provider and outcome (ok or the provider error class).",
    ["provider", "outcome"],
)
MODEL_TOKENS = Counter(
    "fieldops_model_tokens",
    "Tokens the providers reported, by provider and direction (input, output).",
    ["provider", "direction"],
)
TOOL_CALLS = Counter(
    "fieldops_tool_calls",
    "Capability executions, by capability and outcome (ok or the error code).",
    ["tool", "outcome"],
)

SWEEP_SECONDS = Histogram(
    "fieldops_sweep_duration_seconds",
    "How long one sweep took.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
SWEEP_ACTIONS = Counter(
    "fieldops_sweep_actions",
    "What sweeps did, by action (redriven, expired_checkpoints, expired_waits, deadlines, "
    "obligations, owners_gone: leases of dead owners ended early, busy: items left for "
    "the next sweep).",
    ["action"],
)

# Event types that settle an effect attempt (their count is the effect outcomes).
EFFECT_SETTLING = frozenset(
    {
        "effect.recorded",
        "effect.rejected",
        "effect.ambiguous",
        "reconciliation.matched",
        "reconciliation.absent",
        "reconciliation.conflict",
        "reconciliation.unresolved",
        "effect.reconciled",
    }
)


def transition_recorded(*, event_type: str, state: str) -> None:
    _transition(event_type, state).inc()
    if event_type in EFFECT_SETTLING:
        EFFECT_OUTCOMES.labels(outcome=event_type).inc()
    if event_type == "run.recovered":
        LEASE_TAKEOVERS.inc()


@functools.cache
def _transition(event_type: str, state: str) -> Any:
    """The labelled counter (looked up once per pair: every append counts here)."""
    return TRANSITIONS.labels(event_type=event_type, state=state)


def transition_refused(*, reason: str, attempted: str) -> None:
    REFUSALS.labels(reason=reason or "unknown", attempted=attempted).inc()


def decision_offered(*, kind: str, decision: str, outcome: str, waited_s: float | None) -> None:
    APPROVAL_DECISIONS.labels(kind=kind, decision=decision, outcome=outcome).inc()
    if waited_s is not None:
        APPROVAL_WAIT.labels(kind=kind, decision=decision).observe(max(0.0, waited_s))


def model_called(*, provider: str, outcome: str, input_tokens: int, output_tokens: int) -> None:
    MODEL_CALLS.labels(provider=provider, outcome=outcome).inc()
    if input_tokens:
        MODEL_TOKENS.labels(provider=provider, direction="input").inc(input_tokens)
    if output_tokens:
        MODEL_TOKENS.labels(provider=provider, direction="output").inc(output_tokens)


def tool_called(*, tool: str, outcome: str) -> None:
    TOOL_CALLS.labels(tool=tool, outcome=outcome).inc()


def sweep_done(*, seconds: float, actions: dict[str, int]) -> None:
    SWEEP_SECONDS.observe(seconds)
    for action, count in actions.items():
        if count:
            SWEEP_ACTIONS.labels(action=action).inc(count)


class DatabaseCollector(Collector):
    """Gauges read from PostgreSQL at scrape time (every tenant): the truth, not a count
    some process kept."""

    def collect(self) -> Iterator[Metric]:
        from django.db.models import Count, Max, Min, Q

        from approvals.models import Checkpoint
        from kernel import clock
        from runs.domain.states import State
        from runs.models import Outbox, Run, WorkerHeartbeat

        now = clock.now()
        runs = GaugeMetricFamily("fieldops_runs", "Runs by current state.", labels=["state"])
        counted = dict(Run.objects.values_list("state").annotate(n=Count("id")).order_by())
        for state in State:
            runs.add_metric([state.value], counted.get(state.value, 0))
        yield runs
        pending = Outbox.objects.filter(dispatched_at__isnull=True).aggregate(
            n=Count("id"), oldest=Min("created_at")
        )
        yield GaugeMetricFamily(
            "fieldops_outbox_depth", "Outbox rows no relay has delivered.", value=pending["n"]
        )
        yield GaugeMetricFamily(
            "fieldops_outbox_oldest_age_seconds",
            "Age of the oldest undelivered outbox row (0 when there is none).",
            value=_age(now, pending["oldest"]),
        )
        beats = WorkerHeartbeat.objects.aggregate(
            sweeper=Max("seen_at", filter=Q(role=WorkerHeartbeat.SWEEPER)),
            worker=Max(
                "seen_at",
                filter=~Q(role__in=WorkerHeartbeat.SWEEPER_ROLES),
            ),
        )
        lag = GaugeMetricFamily(
            "fieldops_sweeper_lag_seconds",
            "Seconds since the sweeper last reported (absent until it first does).",
        )
        if beats["sweeper"] is not None:
            lag.add_metric([], _age(now, beats["sweeper"]))
        yield lag
        worker = GaugeMetricFamily(
            "fieldops_worker_heartbeat_age_seconds",
            "Seconds since any worker last reported (absent until one has).",
        )
        if beats["worker"] is not None:
            worker.add_metric([], _age(now, beats["worker"]))
        yield worker
        approvals = Checkpoint.objects.filter(status=Checkpoint.Status.PENDING).aggregate(
            n=Count("id"), oldest=Min("created_at")
        )
        yield GaugeMetricFamily(
            "fieldops_checkpoints_pending",
            "Checkpoints waiting for a person.",
            value=approvals["n"],
        )
        yield GaugeMetricFamily(
            "fieldops_checkpoint_oldest_pending_age_seconds",
            "Age of the oldest pending checkpoint (0 when there is none).",
            value=_age(now, approvals["oldest"]),
        )


def _age(now: Any, then: Any) -> float:
    return max(0.0, (now - then).total_seconds()) if then is not None else 0.0


def exposition(*, multiproc_dir: str | None = None) -> bytes:
    """The text exposition of every metric: this process's (or, with ``multiproc_dir``,
    every process's that writes there) and the database's."""
    counted = CollectorRegistry()
    if multiproc_dir:
        MultiProcessCollector(counted, path=multiproc_dir)
    else:
        counted = REGISTRY
    database = CollectorRegistry()
    database.register(DatabaseCollector())
    return generate_latest(counted) + generate_latest(database)


def _may_scrape(request: HttpRequest) -> int:
    """200 for the ops token or a staff session; 401 for no credentials, 403 otherwise."""
    token = str(getattr(settings, "FIELDOPS_OPS_TOKEN", "") or "")
    given = request.headers.get("Authorization", "")
    if token and hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        return 200
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return 200 if user.is_staff else 403
    return 403 if given else 401


# Read-only, read by programs that hold no CSRF token: a POST gets its 405 in this
# endpoint's own format (fieldops.middleware.machine_error), not the console's CSRF page.
@csrf_exempt
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: the Prometheus exposition, for the ops token or staff only."""
    status = _may_scrape(request)
    if status != 200:
        response = HttpResponse(
            "metrics need the ops token (Authorization: Bearer ...) or a staff session\n",
            status=status,
            content_type="text/plain",
        )
        if status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="fieldops-metrics"'
        return response
    body = exposition(multiproc_dir=os.environ.get(MULTIPROC_ENV) or None)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
