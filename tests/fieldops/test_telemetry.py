"""Traces: one reservation run is one trace, its span tree read like the run's timeline."""

from __future__ import annotations

import datetime as dt
import http.server
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from approvals import services as approvals
from approvals.models import Checkpoint
from capabilities import registry
from capabilities.base import Invocation
from fieldops import telemetry
from kernel import clock
from runs.engine import sweeper
from runs.policies import boundary
from runs.policies.base import PolicyOutput
from tests.helpers import approve, events, make_run

ROOT = Path(__file__).resolve().parents[2]


def _children(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    mine = parent.context.span_id
    found = [s for s in spans if s.parent is not None and s.parent.span_id == mine]
    return sorted(found, key=lambda s: s.start_time or 0)


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_one_reservation_run_is_one_trace_of_its_transitions_model_and_tool_calls_and_approval(
    world, approver, spans: InMemorySpanExporter
):
    run = make_run()
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    approve(run, approver)
    run.refresh_from_db()
    assert run.state == "COMPLETED"
    finished = spans.get_finished_spans()

    # One trace, and its id is the run's.
    assert {s.context.trace_id for s in finished} == {run.pk.int}
    roots = [s for s in finished if s.parent is None]
    assert [r.name for r in roots] == ["fieldops.run"]
    root = roots[0]
    assert root.context.span_id == telemetry.root_span_id_of(str(run.pk))
    assert _attributes(root)["fieldops.run.id"] == str(run.pk)
    assert _attributes(root)["fieldops.run.state"] == "COMPLETED"
    assert _attributes(root)["fieldops.run.terminal_reason"] == "all_predicates_pass"

    # Under the root: the first advance (to the approval), the decision, the second advance.
    first, decision, second = _children(finished, root)
    assert [first.name, decision.name, second.name] == [
        "fieldops.advance",
        "approval approve",
        "fieldops.advance",
    ]
    assert _attributes(first)["fieldops.run.state"] == "WAITING_HUMAN"
    assert _attributes(second)["fieldops.run.state"] == "COMPLETED"

    # A span per transition, matching the stored events one for one.
    transitions = sorted(
        (s for s in finished if s.name.startswith("transition ")),
        key=lambda s: _attributes(s)["fieldops.event.sequence"],
    )
    stored = events(run)
    assert [
        (
            a["fieldops.run.id"],
            a["fieldops.event.sequence"],
            a["fieldops.run.state"],
            a["fieldops.event.type"],
            a["fieldops.event.reason"],
        )
        for a in map(_attributes, transitions)
    ] == [(str(run.pk), e.sequence, e.next_state, e.type, e.reason_code) for e in stored]
    granted = [s for s in transitions if s.name == "transition approval.granted"]
    assert _children(finished, decision) == granted

    # The model calls: GenAI chat spans, one per proposal, inside the advances.
    chats = [s for s in finished if _attributes(s).get("gen_ai.operation.name") == "chat"]
    assert len(chats) == sum(e.type == "proposal.emitted" for e in stored) == 5
    for chat in chats:
        assert chat.kind is trace.SpanKind.CLIENT
        assert chat.name == "chat double:reservation"
        assert _attributes(chat)["gen_ai.request.model"] == "double:reservation"
        assert _attributes(chat)["gen_ai.provider.name"] == "openai"
        assert chat.parent is not None and chat.parent.span_id == first.context.span_id

    # The tool executions: GenAI execute_tool spans; the effect in the second advance.
    tools = [s for s in finished if _attributes(s).get("gen_ai.operation.name") == "execute_tool"]
    assert all(_attributes(s)["fieldops.tool.version"] for s in tools)  # the pinned version
    assert [_attributes(s)["gen_ai.tool.name"] for s in tools] == [
        "read_equipment",
        "search_manual",
        "check_inventory",
        "propose_reservation",
        "reserve_part",
    ]
    assert [s.name for s in _children(finished, second)] == [
        "transition proposal.allowed",
        "execute_tool reserve_part",
        "transition effect.recorded",
        "transition completion.verified",
    ]

    # The approval span: checkpoint, decision, approver, hash prefix; never the proposal.
    assert _attributes(decision) == {
        "fieldops.run.id": str(run.pk),
        "fieldops.checkpoint.id": checkpoint.pk,
        "fieldops.checkpoint.kind": "approval",
        "fieldops.approval.decision": "approve",
        "fieldops.approval.approver_ref": "user:approver",
        "fieldops.approval.hash_prefix": checkpoint.proposal_hash[:12],
        "fieldops.approval.outcome": "recorded",
        "fieldops.wait_s": pytest.approx(_attributes(decision)["fieldops.wait_s"]),
    }
    values = [str(v) for s in finished for v in _attributes(s).values()]
    assert not [v for v in values if checkpoint.proposal_hash in v]
    # What the proposal says (the part, slot, location, expiry) is in no span.
    proposal = checkpoint.canonical
    said = [str(proposal[k]) for k in ("part_id", "slot_id", "location_id", "expires_at")]
    assert all(said)
    leaked = [v for v in values for fact in said if fact in v]
    assert leaked == []


def test_a_decision_begun_under_another_trace_joins_the_run_and_links_back(
    world, approver, spans: InMemorySpanExporter
):
    run = make_run()
    assert telemetry._tracer is not None
    with telemetry._tracer.start_as_current_span("GET /approvals/decide") as request_span:
        approve(run, approver, advance=False)
    decision = next(s for s in spans.get_finished_spans() if s.name == "approval approve")
    assert decision.context.trace_id == run.pk.int
    assert decision.parent is not None
    assert decision.parent.span_id == telemetry.root_span_id_of(str(run.pk))
    assert [link.context for link in decision.links] == [request_span.get_span_context()]


def test_a_sweep_is_its_own_span_and_the_expiry_it_records_joins_the_run_and_links_to_it(
    world, spans: InMemorySpanExporter, settings
):
    run = make_run()
    spans.clear()
    clock.advance(settings.FIELDOPS_APPROVAL_TTL_SECONDS + 1)
    sweeper.sweep()
    finished = spans.get_finished_spans()
    [sweep] = [s for s in finished if s.name == "fieldops.sweep"]
    assert sweep.context.trace_id != run.pk.int
    assert _attributes(sweep)["fieldops.sweep.expired_checkpoints"] == 1
    [expiry] = [s for s in finished if s.name == "approval expire"]
    assert expiry.context.trace_id == run.pk.int
    assert [link.context for link in expiry.links] == [sweep.context]
    assert [s.name for s in _children(finished, expiry)] == ["transition approval.expired"]


def test_a_clarification_answer_is_an_approval_span_without_the_answer(
    world, operator, spans: InMemorySpanExporter
):
    run = make_run("clarify", principal="user:operator")
    checkpoint = Checkpoint.objects.get(pk=run.waiting_checkpoint)
    answer = "LOC-N1, the north depot by the loading bay"
    result = approvals.clarification_answer(
        checkpoint_id=checkpoint.pk, user=operator, answer=answer
    )
    assert result.recorded
    [span] = [s for s in spans.get_finished_spans() if s.name == "approval answer"]
    assert _attributes(span)["fieldops.checkpoint.kind"] == "clarification"
    assert _attributes(span)["fieldops.approval.approver_ref"] == "user:operator"
    assert _attributes(span)["fieldops.approval.outcome"] == "recorded"
    values = [str(v) for s in spans.get_finished_spans() for v in _attributes(s).values()]
    assert not [v for v in values if "LOC-N1" in v or "loading bay" in v]


def test_a_refused_decision_is_an_approval_span_with_the_refusal(
    world, approver, spans: InMemorySpanExporter
):
    run = make_run()
    result = approve(run, approver, seen_hash="0" * 64, advance=False)
    assert not result.recorded
    decision = next(s for s in spans.get_finished_spans() if s.name == "approval approve")
    assert _attributes(decision)["fieldops.approval.outcome"] == result.refusal
    assert _attributes(decision)["fieldops.approval.hash_prefix"] == "0" * 12


class _Policy:
    name = "gpt-test"
    version = "p@1"

    def __init__(self, output: PolicyOutput | Exception) -> None:
        self.output = output

    def decide(self, context: Any) -> PolicyOutput:
        if isinstance(self.output, Exception):
            raise self.output
        return self.output


def test_model_call_spans_carry_the_token_usage_and_the_error_class(spans: InMemorySpanExporter):
    answered = PolicyOutput(
        provider="openai",
        model="gpt-test-2025",
        raw={},
        usage={"prompt_tokens": 120, "completion_tokens": 17, "latency_ms": 4},
    )
    boundary.call_policy(_Policy(answered), {})
    boundary.call_policy(_Policy(RuntimeError("boom")), {})
    ok, failed = spans.get_finished_spans()
    assert _attributes(ok) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.response.model": "gpt-test-2025",
        "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 17,
        "fieldops.policy.version": "p@1",
    }
    assert _attributes(failed)["error.type"] == "unclassified"
    assert failed.status.status_code is trace.StatusCode.ERROR


def test_a_refused_tool_call_is_an_error_span_and_a_run_id_that_is_no_uuid_is_tolerated(
    spans: InMemorySpanExporter,
):
    refused = registry.dispatch(
        Invocation(
            capability="run_sql",
            args={"sql": "select 1"},
            run_id="run-x",
            task_id="task-x",
            tenant="north",
            principal_ref="user:operator",
            scope=("LOC-N1",),
            request_id="rq-1",
            deadline=clock.now() + dt.timedelta(seconds=5),
        ),
        None,  # type: ignore[arg-type]  # an unadmitted capability never reaches the world
    )
    assert not refused.ok
    [span] = spans.get_finished_spans()
    assert span.name == "execute_tool run_sql"
    assert _attributes(span)["error.type"] == refused.error
    assert _attributes(span)["fieldops.tool.stage"] == "pre_dispatch"
    assert span.status.status_code is trace.StatusCode.ERROR
    assert "select 1" not in str(_attributes(span))


def test_tracing_is_off_without_an_endpoint(settings):
    settings.FIELDOPS_OTLP_ENDPOINT = ""
    assert telemetry.configure() is False
    assert not telemetry.enabled()


def test_otel_sdk_disabled_keeps_tracing_off_whatever_the_endpoint(settings, monkeypatch):
    settings.FIELDOPS_OTLP_ENDPOINT = "http://127.0.0.1:4318"
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert telemetry.configure() is False
    assert not telemetry.enabled()


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: (path, span name, trace id, attributes) per span."""

    received: list[tuple[str, str, int, dict[str, Any]]] = []

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {
                        a.key: getattr(a.value, a.value.WhichOneof("value") or "string_value")
                        for a in span.attributes
                    }
                    trace_id = int.from_bytes(span.trace_id, "big")
                    _Collector.received.append((self.path, span.name, trace_id, attributes))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


PROBE_RUN = "8a0c0a36-3d8e-4a59-9a37-1f0f6b0cbf8e"


def test_with_an_endpoint_a_process_traces_from_django_setup_and_exports_over_otlp():
    """A process started with OTEL_EXPORTER_OTLP_ENDPOINT turns tracing on in django.setup():
    its requests are traced (probes and scrapes are not), its spans reach the collector at
    /v1/traces (OTLP/HTTP), and a span begun in a run's context is in the run's trace."""
    _Collector.received = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
            "DJANGO_SETTINGS_MODULE": "fieldops.settings",
            "DATABASE_URL": "sqlite://:memory:",
        }
        env.pop("FIELDOPS_OTLP_ENDPOINT", None)
        script = (
            "import django, json; django.setup()\n"
            "from django.test import Client\n"
            "from fieldops import telemetry\n"
            "from opentelemetry import trace\n"
            f"with telemetry.run_context('{PROBE_RUN}'):\n"
            "    trace.get_tracer('probe').start_span('probe').end()\n"
            "statuses = [Client().get(p).status_code for p in ('/no-such-page', '/healthz')]\n"
            "trace.get_tracer_provider().force_flush()\n"
            "print(json.dumps({'enabled': telemetry.enabled(), 'statuses': statuses}))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    # /healthz on an in-memory database nobody migrated: unhealthy (503), and untraced.
    assert shown == {"enabled": True, "statuses": [404, 503]}
    assert {path for path, *_ in _Collector.received} == {"/v1/traces"}
    [probe] = [r for r in _Collector.received if r[1] == "probe"]
    assert probe[2] == uuid.UUID(PROBE_RUN).int
    # The instrumentation's HTTP attributes (the semantic conventions it emits by default).
    requests = [r[3] for r in _Collector.received if "http.method" in r[3]]
    assert [(a["http.url"], a["http.status_code"]) for a in requests] == [
        ("http://testserver/no-such-page", 404)
    ]
