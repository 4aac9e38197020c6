"""An in-memory span exporter behind the process's tracer provider, for the tracing tests.

OpenTelemetry allows one global provider per process: it is installed on first use and every
test clears the exporter before it starts recording.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_EXPORTER = InMemorySpanExporter()
_installed: list[bool] = []


def finished_spans() -> InMemorySpanExporter:
    if not _installed:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
        _installed.append(True)
    _EXPORTER.clear()
    return _EXPORTER
