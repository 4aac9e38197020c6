"""Tracing is off unless the standard OpenTelemetry environment turns it on."""

from __future__ import annotations

import pytest

from signoff.observability.tracing import tracing_wanted


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, None),
        ({"OTEL_SERVICE_NAME": "signoff"}, None),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}, None),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, None),
    ],
)
def test_the_otel_environment_decides_whether_and_where_spans_go(
    environ: dict[str, str], wanted: str | None
) -> None:
    assert tracing_wanted(environ) == wanted
