"""OpenTelemetry traces, off unless the standard ``OTEL_*`` environment turns them on.

Off (the default), no SDK is installed: the MCP SDK's ``OpenTelemetryMiddleware`` and signoff's
stage spans talk to the API's no-op tracer, which records nothing and costs a function call.
On — ``OTEL_TRACES_EXPORTER=otlp`` (or ``console``), or any ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` — spans go through a batching processor to the OTLP/HTTP
exporter, which reads its endpoint, headers, timeout and compression from the same standard
variables. ``OTEL_SDK_DISABLED=true`` wins over everything. ``OTEL_SERVICE_NAME`` names the
service (default ``signoff``); ``OTEL_RESOURCE_ATTRIBUTES`` adds to it.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace

from signoff.extras import require


def tracing_wanted(environ: Mapping[str, str]) -> str | None:
    """Which exporter the environment asks for: ``otlp``, ``console`` or ``None`` (off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = [
        e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if e.strip()
    ]
    if "none" in exporters:
        return None
    if "console" in exporters:
        return "console"
    if "otlp" in exporters:
        return "otlp"
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    ):
        return "otlp"
    return None


def configure_tracing(environ: Mapping[str, str]) -> bool:
    """Install the SDK's tracer provider when the environment asks for traces."""
    exporter = tracing_wanted(environ)
    if exporter is None:
        return False
    require("otel", f"OpenTelemetry traces (the {exporter} exporter, from OTEL_*)")
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    from signoff import __version__

    resource = Resource.create(
        {
            "service.name": environ.get("OTEL_SERVICE_NAME") or "signoff",
            "service.version": __version__,
        }
    )
    provider = TracerProvider(resource=resource)
    chosen: SpanExporter
    if exporter == "console":
        chosen = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        chosen = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(chosen))
    trace.set_tracer_provider(provider)
    return True


def shutdown_tracing() -> None:
    """Flush spans still in the batch (at exit)."""
    provider = trace.get_tracer_provider()
    shutdown = getattr(provider, "shutdown", None)
    if callable(shutdown):
        shutdown()
