"""Without a tracer provider a stage is timed for its histogram and makes no span; with one, the
stage is a span (``test_observability.py``)."""

from __future__ import annotations

import pytest
from opentelemetry import trace

from signoff.observability.metrics import Metrics
from signoff.observability.observer import OperationsObserver


def _count(metrics: Metrics, stage: str) -> float:
    value = metrics.registry.get_sample_value(
        "signoff_stage_duration_seconds_count", {"stage": stage}
    )
    return value or 0.0


def test_an_untraced_stage_is_timed_and_lets_its_exception_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    metrics = Metrics()
    observer = OperationsObserver(metrics=metrics)
    with observer.stage("validate", "run-1", "invoice.cancel") as scope:
        scope.set(code="SUCCEEDED")
    with pytest.raises(KeyError), observer.stage("validate", "run-2", "invoice.cancel"):
        raise KeyError("boom")
    with observer.stage("policy", "run-2", "invoice.cancel"):
        pass
    assert _count(metrics, "validate") == 2
    assert _count(metrics, "policy") == 1
    assert trace.get_current_span() is trace.INVALID_SPAN
