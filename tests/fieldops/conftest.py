from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fieldops import telemetry


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """FieldOps spans recorded in memory for the test (tracing is off otherwise)."""
    exporter = InMemorySpanExporter()
    telemetry.install(SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        telemetry.uninstall()
