"""One trace per run across processes: the approving process and a real Celery worker
(exporting over OTLP/HTTP to a collector in this test) put their spans in the run's trace,
and the task headers carry the run's context from the publish to the worker."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fieldops import telemetry
from tests.durable.helpers import wait_for
from tests.durable.test_worker import approve, start

pytestmark = [pytest.mark.celery, pytest.mark.postgres]


@dataclass(frozen=True)
class Exported:
    name: str
    trace_id: int
    span_id: int
    parent_span_id: int
    attributes: dict[str, Any]


class _Collector(http.server.BaseHTTPRequestHandler):
    spans: list[Exported] = []

    def do_POST(self) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    _Collector.spans.append(
                        Exported(
                            span.name,
                            int.from_bytes(span.trace_id, "big"),
                            int.from_bytes(span.span_id, "big"),
                            int.from_bytes(span.parent_span_id or b"\0", "big"),
                            {a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value")) if value.WhichOneof("value") else None


@pytest.fixture
def collector() -> Iterator[str]:
    _Collector.spans = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """This process's FieldOps spans, in memory."""
    exporter = InMemorySpanExporter()
    telemetry.install(SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        telemetry.uninstall()


@pytest.fixture
def instrumented_publish(spans: InMemorySpanExporter) -> Iterator[None]:
    """This process publishes tasks the way a traced web process does."""
    assert telemetry._provider is not None
    CeleryInstrumentor().instrument(tracer_provider=telemetry._provider)
    try:
        yield
    finally:
        CeleryInstrumentor().uninstrument()


def _exported_until(names: set[str], timeout: float = 20.0) -> list[Exported]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if names <= {s.name for s in _Collector.spans}:
            break
        time.sleep(0.2)
    return list(_Collector.spans)


def test_a_run_advanced_by_a_worker_and_approved_here_is_one_trace(
    cluster,
    approver,
    collector,
    spans: InMemorySpanExporter,
    instrumented_publish,
):
    cluster.start_worker(OTEL_EXPORTER_OTLP_ENDPOINT=collector, OTEL_BSP_SCHEDULE_DELAY="100")
    run = wait_for(start(), ["WAITING_HUMAN"], sweep=False)
    assert approve(run, approver).recorded
    run = wait_for(run, ["COMPLETED"], sweep=False)
    worker = _exported_until({"fieldops.run", "execute_tool reserve_part"})
    here = spans.get_finished_spans()

    # Everything the worker and this process recorded for the run is in the run's trace.
    mine = ("fieldops.", "transition ", "chat ", "execute_tool ")
    ours = [s for s in worker if s.name.startswith(mine)]
    assert {s.trace_id for s in ours} == {run.pk.int}
    roots = [s for s in worker if s.name == "fieldops.run"]
    assert [r.span_id for r in roots] == [telemetry.root_span_id_of(str(run.pk))]
    assert roots[0].attributes["fieldops.run.state"] == "COMPLETED"
    decision = next(s for s in here if s.name == "approval approve")
    assert decision.context.trace_id == run.pk.int
    transitions = {s.attributes["fieldops.event.sequence"] for s in ours if "transition " in s.name}
    granted = [s for s in here if s.name == "transition approval.granted"]
    assert [s.attributes["fieldops.event.sequence"] for s in granted] == [21]
    assert transitions | {21} == set(range(1, run.revision + 1))

    # The task headers carried the run's context: each worker task span (Celery's
    # instrumentation) is a child of a publish made here, in the run's trace.
    publishes = {
        s.context.span_id: s for s in here if s.name == "apply_async/runs.tasks.run_advance"
    }
    tasks = [s for s in worker if s.name == "run/runs.tasks.run_advance"]
    assert len(tasks) >= 2  # before and after the approval
    assert {t.trace_id for t in tasks} == {run.pk.int}
    assert all(t.parent_span_id in publishes for t in tasks)
    # The worker's advance spans nest under its task spans.
    advances = [s for s in worker if s.name == "fieldops.advance"]
    assert {a.parent_span_id for a in advances} <= {t.span_id for t in tasks}
    assert {a.attributes["fieldops.run.state"] for a in advances} >= {"WAITING_HUMAN", "COMPLETED"}
