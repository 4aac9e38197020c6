"""``OperationsObserver``: the core's observer port made into log lines, metrics and spans.

- one log line per governed call (logger ``signoff.calls``) and per decision
  (``signoff.decisions``), facts as fields; the input only when ``log_inputs``;
- ``signoff_governed_calls_total``, ``signoff_governed_call_duration_seconds``,
  ``signoff_stage_duration_seconds``, ``signoff_approval_decisions_total``,
  ``signoff_approval_wait_seconds``, ``signoff_cas_conflicts_total`` (no run ids or tenants);
- a child span per pipeline stage (``signoff.<stage>``) under the MCP SDK's server span, with
  ``signoff.*`` attributes, and the call's facts on the server span itself — when a tracer
  provider is installed (``tracing.py``); without one a stage is timed for its histogram only,
  with no span object, context attach or generator per stage (seven stages per governed call).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from signoff.core.observe import AttributeValue, CallReport, DecisionReport, StageScope
from signoff.observability.labels import (
    AUDIT_KINDS,
    RETRIES,
    STAGES,
    STATUSES,
    UNKNOWN,
    VOTES,
    one_of,
)
from signoff.observability.metrics import METRICS, Metrics

calls_log = logging.getLogger("signoff.calls")
decisions_log = logging.getLogger("signoff.decisions")
_tracer = trace.get_tracer("signoff")
_MAX_CAPTURED = 4096


class _SpanScope:
    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def set(self, **attributes: AttributeValue) -> None:
        if self.span.is_recording():
            self.span.set_attributes({f"signoff.{k}": v for k, v in attributes.items()})


class _Timed:
    """A stage when nothing traces: its duration goes to the stage histogram, facts nowhere."""

    __slots__ = ("_histogram", "_started")

    def __init__(self, histogram: Any) -> None:
        self._histogram = histogram
        self._started = 0.0

    def __enter__(self) -> _Timed:
        self._started = time.perf_counter()
        return self

    def set(self, **attributes: AttributeValue) -> None:
        pass

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._histogram.observe(time.perf_counter() - self._started)


class OperationsObserver:
    """``log_inputs`` / ``trace_payloads``: put the proposal's input in the call's log line /
    on its span (off by default: inputs may hold personal or secret data)."""

    def __init__(
        self,
        *,
        metrics: Metrics = METRICS,
        log_inputs: bool = False,
        trace_payloads: bool = False,
    ) -> None:
        self.metrics = metrics
        self.log_inputs = log_inputs
        self.trace_payloads = trace_payloads
        self._stage_histograms: dict[str, Any] = {}

    def call_finished(self, report: CallReport) -> None:
        m = self.metrics
        # Label values: this server's own names or "unknown" (labels.py); a tool name a client
        # made up, or a code an executor made up, is never one.
        action = report.action if report.registered else UNKNOWN
        code = report.code if report.own_code else UNKNOWN
        status = one_of(report.status, STATUSES)
        m.governed_calls.labels(
            action=action, status=status, code=code, retry=one_of(report.retry, RETRIES)
        ).inc()
        m.governed_duration.labels(action=action, status=status).observe(report.duration_s)
        fields: dict[str, Any] = {
            "run_id": report.run_id,
            "tenant": report.tenant_id,
            "action": report.action,
            "principal": report.principal,
            "channel": report.channel,
            "status": report.status,
            "code": report.code,
            "retry": report.retry,
            "duration_ms": round(report.duration_s * 1000, 3),
        }
        if report.duplicate_of:
            fields["duplicate_of"] = report.duplicate_of
        if self.log_inputs and report.input is not None:
            fields["input"] = dict(report.input)
        calls_log.info("%s %s -> %s", report.action, report.run_id, report.code, extra=fields)
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(
                {
                    "signoff.run_id": report.run_id,
                    "signoff.action": report.action,
                    "signoff.status": report.status,
                    "signoff.code": report.code,
                    "signoff.retry": report.retry,
                }
            )
            if report.duplicate_of:
                span.set_attribute("signoff.duplicate_of", report.duplicate_of)
            if self.trace_payloads and report.input is not None:
                text = json.dumps(report.input, ensure_ascii=False, default=str)
                span.set_attribute("signoff.input", text[:_MAX_CAPTURED])

    def decision(self, report: DecisionReport) -> None:
        action = report.action if report.registered else UNKNOWN
        vote = one_of(report.vote, VOTES)
        outcome = vote if report.accepted else "refused"
        self.metrics.decisions.labels(action=action, decision=outcome).inc()
        if report.waited_s is not None:
            self.metrics.approval_wait.labels(action=action, decision=vote).observe(report.waited_s)
        decisions_log.info(
            "%s %s by %s -> %s",
            report.vote,
            report.run_id,
            report.approver,
            report.code,
            extra={
                "run_id": report.run_id,
                "tenant": report.tenant_id,
                "action": report.action,
                "principal": report.approver,
                "vote": report.vote,
                "code": report.code,
                "accepted": report.accepted,
                "status": report.status,
                "duration_ms": round(report.duration_s * 1000, 3),
                **({"waited_s": round(report.waited_s, 3)} if report.waited_s is not None else {}),
            },
        )

    def stage(self, name: str, run_id: str, action: str) -> AbstractContextManager[StageScope]:
        histogram = self._stage_histograms.get(name)
        if histogram is None:
            stage = one_of(name, STAGES)
            histogram = self.metrics.stage.labels(stage=stage)
            if stage == name:  # the cache holds this server's stages only
                self._stage_histograms[name] = histogram
        if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
            return _Timed(histogram)  # no provider installed: a span would record nothing
        return self._traced(name, run_id, action, histogram)

    @contextmanager
    def _traced(self, name: str, run_id: str, action: str, histogram: Any) -> Iterator[StageScope]:
        started = time.perf_counter()
        with _tracer.start_as_current_span(
            f"signoff.{name}",
            attributes={"signoff.run_id": run_id, "signoff.action": action},
            record_exception=True,
        ) as span:
            scope = _SpanScope(span)
            try:
                yield scope
            finally:
                histogram.observe(time.perf_counter() - started)

    def cas_conflict(self, operation: str) -> None:
        self.metrics.cas_conflicts.labels(operation=one_of(operation, AUDIT_KINDS)).inc()
