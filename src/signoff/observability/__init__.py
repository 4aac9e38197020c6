"""Metrics, structured logs and traces for operators.

Other layers report facts through these functions (cheap, never raising, no run ids or tenants as
labels, every label value one of this server's own names or ``unknown``: ``labels.py``);
``/metrics`` exposes them::

    from signoff.observability import record_undecodable_row
    record_undecodable_row("runs")     # a stored row that could not be decoded
"""

from __future__ import annotations

# The registry and the label catalogs load when a fact is first recorded: importing a module of
# this package (the command line's log formats) loads neither prometheus_client nor the core.
__all__ = [
    "record_callback_refusal",
    "record_cas_conflict",
    "record_undecodable_row",
]


def record_undecodable_row(table: str) -> None:
    """A stored row of ``table`` (``runs``, ``audit``, ``duplicates``…) could not be decoded."""
    from signoff.observability.labels import TABLES, one_of
    from signoff.observability.metrics import METRICS

    METRICS.undecodable_rows.labels(table=one_of(table, TABLES)).inc()


def record_callback_refusal(reason: str) -> None:
    """A completion callback was refused; ``reason`` is a stable code, not a message (a code
    outside the catalog counts as ``unknown``)."""
    from signoff.observability.labels import CALLBACK_REASONS, one_of
    from signoff.observability.metrics import METRICS

    METRICS.callback_refusals.labels(reason=one_of(reason, CALLBACK_REASONS)).inc()


def record_cas_conflict(operation: str) -> None:
    """A compare-and-set lost to a concurrent writer (``operation``: propose, decide, cancel…)."""
    from signoff.observability.labels import AUDIT_KINDS, one_of
    from signoff.observability.metrics import METRICS

    METRICS.cas_conflicts.labels(operation=one_of(operation, AUDIT_KINDS)).inc()
