"""Traces and metrics at the few places where the engine decides or calls out.

The call sites wear one decorator each: the transition authority (``traced_transition``
on ``runs.authority.append``), one owner's advance (``traced_advance``), the model call
(``traced_model_call``), capability execution (``traced_tool_call``), the decisions on
checkpoints (``traced_decision``) and the sweeper (``traced_sweep``). Each decorator
counts in ``fieldops.metrics`` always and records a span when tracing is on.

Tracing is off unless an OTLP endpoint is configured (``FIELDOPS_OTLP_ENDPOINT``, which
defaults to ``OTEL_EXPORTER_OTLP_ENDPOINT``); then ``configure`` (called when the apps are
ready, in every web and worker process) exports spans over OTLP and turns on the Django,
Celery and psycopg instrumentations.

One trace per run, in every process: the run's trace id *is* its id (the UUID's 128 bits)
and its root span id is derived from it, so the web request that approves a run, the
Celery worker that advances it and the sweeper that expires its checkpoint all put their
spans in the run's trace without storing or looking anything up. A span begun under
another trace (an HTTP request, a sweep) joins the run's trace and links back to where it
came from. The Celery task of a run is published in the run's context (``run_context``),
so the Celery instrumentation carries it in the task headers too, and the worker's task
span is a child of the publish. The root span (``fieldops.run``) is emitted when the run
ends, from its creation to its end.

Spans never carry payloads: no proposal, no arguments, no model output, no answer text —
ids, types, states, reason codes, token counts and hash prefixes only.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from django.conf import settings
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from fieldops import metrics

F = TypeVar("F", bound=Callable[..., Any])

_provider: TracerProvider | None = None
_tracer: trace.Tracer | None = None
_instrumented = False
# The ids the next span must take (the run's root span); None: random ids.
_forced_ids: ContextVar[tuple[int, int] | None] = ContextVar("fieldops_forced_ids", default=None)

HASH_PREFIX = 12


class _RunIds(IdGenerator):
    """Random ids, except for the span begun while ``_forced_ids`` is set (a run's root)."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        forced = _forced_ids.get()
        return forced[0] if forced else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        forced = _forced_ids.get()
        return forced[1] if forced else self._random.generate_span_id()


# --- turning it on ---------------------------------------------------------------------


def endpoint() -> str:
    return str(getattr(settings, "FIELDOPS_OTLP_ENDPOINT", "") or "")


def enabled() -> bool:
    return _tracer is not None


def configure() -> bool:
    """Turn tracing on when an OTLP endpoint is configured; return whether it is on.

    Idempotent; ``OTEL_SDK_DISABLED=true`` keeps it off. Spans go to
    ``{endpoint}/v1/traces`` over OTLP/HTTP, or to the endpoint over gRPC when
    ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc``.
    """
    if _provider is not None:
        return True
    url = endpoint()
    if not url or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    exporter: Any
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=url)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
            OTLPSpanExporter as HTTPSpanExporter,
        )

        traces = url.rstrip("/")
        exporter = HTTPSpanExporter(
            endpoint=traces if traces.endswith("/v1/traces") else traces + "/v1/traces"
        )
    provider = install(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _instrument(provider)
    return True


def install(processor: SpanProcessor) -> TracerProvider:
    """Record FieldOps spans through ``processor`` from now on (``configure`` uses it; a
    test passes an in-memory exporter's processor). Return the tracer provider."""
    global _provider, _tracer
    service = os.environ.get("OTEL_SERVICE_NAME", "fieldops")
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}), id_generator=_RunIds()
    )
    provider.add_span_processor(processor)
    _provider, _tracer = provider, provider.get_tracer("fieldops")
    return provider


def uninstall() -> None:
    """Stop recording FieldOps spans (tests)."""
    global _provider, _tracer
    if _provider is not None:
        _provider.shutdown()
    _provider, _tracer = None, None


def _instrument(provider: TracerProvider) -> None:
    global _instrumented
    if _instrumented:
        return
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

    # Scrapes and probes (every few seconds) are not worth a trace each, unless asked.
    excluded = os.environ.get("OTEL_PYTHON_DJANGO_EXCLUDED_URLS", "healthz,metrics")
    DjangoInstrumentor().instrument(tracer_provider=provider, excluded_urls=excluded)
    CeleryInstrumentor().instrument(tracer_provider=provider)
    PsycopgInstrumentor().instrument(tracer_provider=provider, skip_dep_check=True)
    _instrumented = True


# --- the run's trace -------------------------------------------------------------------


def trace_id_of(run_id: str) -> int:
    """The trace id of a run: its UUID as a 128-bit number (raise ValueError otherwise)."""
    return uuid.UUID(str(run_id)).int


def root_span_id_of(run_id: str) -> int:
    digest = hashlib.sha256(f"fieldops.run:{uuid.UUID(str(run_id))}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


@functools.lru_cache(maxsize=4096)
def _root_context(run_id: str) -> SpanContext:
    return SpanContext(
        trace_id=trace_id_of(run_id),
        span_id=root_span_id_of(run_id),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )


@contextmanager
def run_context(run_id: str) -> Iterator[None]:
    """Inside the block the current span context is the run's root (a task published here
    carries it in its headers). A no-op when tracing is off."""
    if _tracer is None:
        yield
        return
    try:
        parent = trace.set_span_in_context(NonRecordingSpan(_root_context(run_id)))
    except ValueError:
        yield
        return
    token = otel_context.attach(parent)
    try:
        yield
    finally:
        otel_context.detach(token)


@contextmanager
def _span(
    name: str,
    run_id: str | None,
    attributes: Mapping[str, Any],
    *,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Iterator[trace.Span | None]:
    """A current span in the run's trace: under the current span when that is in the same
    trace (or no run is known), else under the run's root with a link to the current one."""
    if _tracer is None:
        yield None
        return
    current = trace.get_current_span().get_span_context()
    parent: otel_context.Context | None = None
    links: list[Link] = []
    if run_id:
        try:
            root = _root_context(run_id)
        except ValueError:
            root = None
        if root is not None and not (current.is_valid and current.trace_id == root.trace_id):
            parent = trace.set_span_in_context(NonRecordingSpan(root))
            links = [Link(current)] if current.is_valid else []
    with _tracer.start_as_current_span(
        name, context=parent, kind=kind, attributes=_clean(attributes), links=links
    ) as span:
        yield span


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None and v != ""}


def _root_span(snapshot: Any, event: Any) -> None:
    """Emit the run's root span (its whole life) when its terminal event is appended."""
    if _tracer is None:
        return
    config = snapshot.config
    ids = (trace_id_of(config.run_id), root_span_id_of(config.run_id))
    token = _forced_ids.set(ids)
    try:
        span = _tracer.start_span(
            "fieldops.run",
            context=otel_context.Context(),
            start_time=_ns(dt.datetime.fromisoformat(config.created_at)),
            attributes=_clean(
                {
                    "fieldops.run.id": config.run_id,
                    "fieldops.run.task": config.task_id,
                    "fieldops.run.tenant": config.tenant,
                    "fieldops.run.state": str(event.next_state),
                    "fieldops.run.disposition": snapshot.disposition,
                    "fieldops.run.terminal_reason": event.reason_code,
                    "fieldops.run.events": event.sequence,
                }
            ),
        )
    finally:
        _forced_ids.reset(token)
    from kernel import clock

    span.end(end_time=_ns(clock.now()))


def _ns(moment: dt.datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)


# --- the call sites --------------------------------------------------------------------


def traced_transition(append: F) -> F:
    """For ``runs.authority.append``: a span per append (applied or refused) and the
    transition and refusal counters."""

    @functools.wraps(append)
    def wrapper(**kw: Any) -> Any:
        requested = str(kw.get("type", ""))
        if _tracer is None:  # the common case: count only
            result = append(**kw)
            _count_transition(requested, result)
            return result
        attributes = {
            "fieldops.run.id": str(kw.get("run_id", "")),
            "fieldops.event.requested_type": requested,
            "fieldops.event.actor": str(kw.get("actor", "")),
        }
        with _span(f"transition {requested}", attributes["fieldops.run.id"], attributes) as span:
            result = append(**kw)
            _transition_done(span, requested, result)
        return result

    return cast(F, wrapper)


def _count_transition(requested: str, result: Any) -> None:
    stored = result.event if result.applied else result.control
    if not result.applied:
        metrics.transition_refused(reason=result.refusal, attempted=requested)
    if stored is not None:
        metrics.transition_recorded(event_type=str(stored.type), state=str(result.snapshot.state))


def _transition_done(span: trace.Span | None, requested: str, result: Any) -> None:
    _count_transition(requested, result)
    if span is None:
        return
    stored = result.event if result.applied else result.control
    state = str(result.snapshot.state)
    span.set_attributes(
        _clean(
            {
                "fieldops.transition.outcome": "applied" if result.applied else "refused",
                "fieldops.refusal": result.refusal,
                "fieldops.run.state": state,
                "fieldops.event.type": str(stored.type) if stored else None,
                "fieldops.event.sequence": stored.sequence if stored else None,
                "fieldops.event.reason": stored.reason_code if stored else None,
                "fieldops.event.prev_state": str(stored.prev_state) if stored else None,
            }
        )
    )
    if result.applied and stored.prev_state != stored.next_state:
        from runs.domain.states import is_terminal

        if is_terminal(stored.next_state):
            _root_span(result.snapshot, stored)


def transition_in_batch(requested: str, result: Any) -> None:
    """What ``traced_transition`` records for one append, for an append made in a batch
    (``runs.authority_batch``): the transition and refusal counters, and the run's root
    span when the append ended the run. The batch is one transaction, so there is no span
    per append."""
    _count_transition(requested, result)
    stored = result.event if result.applied else None
    if stored is not None and stored.prev_state != stored.next_state:
        from runs.domain.states import is_terminal

        if is_terminal(stored.next_state):
            _root_span(result.snapshot, stored)


def traced_advance(advance: F) -> F:
    """For ``runs.engine.runner.advance``: one owner's advance of a run, as a span."""

    @functools.wraps(advance)
    def wrapper(run_id: str, **kw: Any) -> Any:
        attributes = {"fieldops.run.id": str(run_id), "fieldops.worker": kw.get("worker")}
        with _span("fieldops.advance", str(run_id), attributes) as span:
            state = advance(run_id, **kw)
            if span is not None:
                span.set_attribute("fieldops.run.state", str(state))
        return state

    return cast(F, wrapper)


def traced_model_call(call: F) -> F:
    """For the model boundary's ``call_policy(policy, projection)``: a GenAI ``chat`` span
    (OpenTelemetry GenAI semantic conventions) and the model counters."""

    @functools.wraps(call)
    def wrapper(policy: Any, projection: Any) -> Any:
        config = getattr(policy, "config", None)
        requested = str(getattr(config, "model", "") or getattr(policy, "name", "") or "model")
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": requested,
            "fieldops.policy.version": str(getattr(policy, "version", "")),
        }
        with _span(f"chat {requested}", None, attributes, kind=SpanKind.CLIENT) as span:
            output = call(policy, projection)
            usage = dict(output.usage)
            tokens_in = _tokens(usage, "input_tokens", "prompt_tokens")
            tokens_out = _tokens(usage, "output_tokens", "completion_tokens")
            metrics.model_called(
                provider=str(output.provider),
                outcome=output.error or "ok",
                input_tokens=tokens_in or 0,
                output_tokens=tokens_out or 0,
            )
            if span is not None:
                span.set_attributes(
                    _clean(
                        {
                            "gen_ai.provider.name": str(output.provider),
                            "gen_ai.response.model": str(output.model)[:200],
                            "gen_ai.usage.input_tokens": tokens_in,
                            "gen_ai.usage.output_tokens": tokens_out,
                            "error.type": output.error,
                        }
                    )
                )
                if output.error:
                    span.set_status(trace.StatusCode.ERROR, output.error)
        return output

    return cast(F, wrapper)


def _tokens(usage: Mapping[str, Any], *names: str) -> int | None:
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def traced_tool_call(dispatch: F) -> F:
    """For ``capabilities.registry.dispatch(invocation, world)``: a GenAI ``execute_tool``
    span and the tool counter (never the arguments or the result)."""

    @functools.wraps(dispatch)
    def wrapper(inv: Any, world: Any) -> Any:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": inv.capability,
            "gen_ai.tool.call.id": inv.request_id,
            "gen_ai.tool.type": "extension",
            "fieldops.tool.version": getattr(inv, "version", None),
            "fieldops.run.id": inv.run_id,
            "fieldops.tool.fencing_token": inv.fencing_token or None,
        }
        with _span(f"execute_tool {inv.capability}", inv.run_id, attributes) as span:
            outcome = dispatch(inv, world)
            metrics.tool_called(tool=inv.capability, outcome=outcome.error or "ok")
            if span is not None:
                span.set_attributes(
                    _clean(
                        {
                            "fieldops.tool.stage": outcome.stage,
                            "fieldops.tool.attempts": outcome.attempts,
                            "error.type": outcome.error,
                        }
                    )
                )
                if not outcome.ok:
                    span.set_status(trace.StatusCode.ERROR, outcome.error)
        return outcome

    return cast(F, wrapper)


def traced_sweep(sweep: F) -> F:
    """For ``runs.engine.sweeper.sweep``: a span per sweep (its own trace; the runs it acts
    on get the transitions, linked back to it) and the sweep's duration and actions."""

    @functools.wraps(sweep)
    def wrapper(**kw: Any) -> Any:
        started = time.monotonic()
        with _span("fieldops.sweep", None, {}) as span:
            report = sweep(**kw)
            done = {action: len(items) for action, items in report.as_dict().items()}
            metrics.sweep_done(seconds=time.monotonic() - started, actions=done)
            if span is not None:
                span.set_attributes({f"fieldops.sweep.{a}": n for a, n in done.items()})
        return report

    return cast(F, wrapper)


def traced_decision(decision: str) -> Callable[[F], F]:
    """For the decisions on a checkpoint (``approval_decide``, ``clarification_answer``,
    ``checkpoint_expire``; keyword arguments, ``checkpoint_id`` among them): an approval
    span (checkpoint, decision, approver reference, hash prefix; never the proposal or the
    answer), the decision counter and, once recorded, the wait histogram.

    ``decision``: "approve" (the ``approve`` argument says approve or decline), "answer"
    or "expire".
    """

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(**kw: Any) -> Any:
            from access.roles import principal_ref_of
            from kernel import clock

            checkpoint_id = str(kw.get("checkpoint_id", ""))
            verdict = decision
            if decision == "approve":
                verdict = "approve" if kw.get("approve") else "decline"
            # Only a span needs the run before the decision (it is the span's trace); the
            # counters read the checkpoint the decision returns, so untraced decisions
            # cost no query.
            seen = _checkpoint(checkpoint_id) if _tracer is not None else None
            user = kw.get("user")
            attributes = {
                "fieldops.run.id": seen[0] if seen else None,
                "fieldops.checkpoint.id": checkpoint_id,
                "fieldops.checkpoint.kind": seen[1] if seen else None,
                "fieldops.approval.decision": verdict,
                "fieldops.approval.approver_ref": principal_ref_of(user) if user else None,
                "fieldops.approval.hash_prefix": str(kw.get("seen_hash") or "")[:HASH_PREFIX],
            }
            with _span(f"approval {verdict}", seen[0] if seen else None, attributes) as span:
                result = fn(**kw)
                recorded = bool(getattr(result, "recorded", result))
                outcome = "recorded" if recorded else (getattr(result, "refusal", "") or "no")
                returned = getattr(result, "checkpoint", None)
                if returned is not None:
                    seen = (str(returned.run_id), returned.kind, returned.created_at)
                elif seen is None:  # checkpoint_expire answers a bool
                    seen = _checkpoint(checkpoint_id)
                kind, opened = (seen[1], seen[2]) if seen else ("unknown", None)
                waited = (clock.now() - opened).total_seconds() if recorded and opened else None
                metrics.decision_offered(
                    kind=kind, decision=verdict, outcome=outcome, waited_s=waited
                )
                if span is not None:
                    span.set_attributes(
                        _clean({"fieldops.approval.outcome": outcome, "fieldops.wait_s": waited})
                    )
            return result

        return cast(F, wrapper)

    return wrap


def _checkpoint(checkpoint_id: str) -> tuple[str, str, dt.datetime] | None:
    """(run id, kind, opened at) of a checkpoint, or None."""
    from approvals.models import Checkpoint

    found = (
        Checkpoint.objects.filter(pk=checkpoint_id)
        .values_list("run_id", "kind", "created_at")
        .first()
    )
    return (str(found[0]), found[1], found[2]) if found else None
