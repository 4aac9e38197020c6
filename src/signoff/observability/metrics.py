"""signoff's Prometheus metrics, on a registry of its own (``METRICS.registry``).

Labels are low-cardinality by design: actions, codes, statuses, stages, MCP methods and tool
names — never run ids, tenants, principals or inputs — and each value is one of this server's own
names or ``unknown`` (``labels.py``). Names follow the OpenTelemetry MCP semantic
conventions where they exist (``mcp.server.operation.duration`` becomes
``mcp_server_operation_duration_seconds`` in Prometheus, with ``mcp_method_name``,
``gen_ai_tool_name`` and ``error_type``) and are prefixed ``signoff_`` otherwise.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# The semantic conventions' recommended boundaries for mcp.server.operation.duration.
MCP_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
WAIT_BUCKETS = (1, 10, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.mcp_operation = Histogram(
            "mcp_server_operation_duration",
            "MCP request duration as seen by the server (OpenTelemetry MCP conventions).",
            ["mcp_method_name", "gen_ai_tool_name", "error_type"],
            unit="seconds",
            buckets=MCP_BUCKETS,
            registry=r,
        )
        self.governed_calls = Counter(
            "signoff_governed_calls",
            "Governed proposals answered, by action, outcome status, code and retry.",
            ["action", "status", "code", "retry"],
            registry=r,
        )
        self.governed_duration = Histogram(
            "signoff_governed_call_duration",
            "Time from proposal to answer, by action and outcome status.",
            ["action", "status"],
            unit="seconds",
            buckets=MCP_BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            "signoff_stage_duration",
            "Time spent in each pipeline stage.",
            ["stage"],
            unit="seconds",
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.decisions = Counter(
            "signoff_approval_decisions",
            "Approval decisions recorded, by action and vote or outcome.",
            ["action", "decision"],
            registry=r,
        )
        self.approval_wait = Histogram(
            "signoff_approval_wait",
            "How long runs waited for approval, from request to the deciding vote or expiry.",
            ["action", "decision"],
            unit="seconds",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.cas_conflicts = Counter(
            "signoff_cas_conflicts",
            "Compare-and-set writes that lost to a concurrent writer and were retried.",
            ["operation"],
            registry=r,
        )
        self.callback_refusals = Counter(
            "signoff_callback_refusals",
            "Completion callbacks refused, by reason.",
            ["reason"],
            registry=r,
        )
        self.undecodable_rows = Counter(
            "signoff_undecodable_rows",
            "Stored rows that could not be decoded and were shown as unreadable instead.",
            ["table"],
            registry=r,
        )
        self.pending_approvals = Gauge(
            "signoff_pending_approvals",
            "Runs waiting for approval (read from the store at scrape time).",
            registry=r,
        )
        self.nonterminal_runs = Gauge(
            "signoff_nonterminal_runs",
            "Runs not yet final, by status (read from the store at scrape time).",
            ["status"],
            registry=r,
        )
        self.nonterminal_oldest = Gauge(
            "signoff_nonterminal_run_oldest_age",
            "Age of the oldest run not yet final, by status.",
            ["status"],
            unit="seconds",
            registry=r,
        )
        self.lane_in_use = Gauge(
            "signoff_lane_in_use",
            "Background executions running or queued in this process's lane.",
            registry=r,
        )
        self.lane_capacity = Gauge(
            "signoff_lane_capacity",
            "How many background executions this process's lane takes (running plus queued).",
            registry=r,
        )

    def exposition(self) -> bytes:
        """The Prometheus text format of everything registered."""
        return generate_latest(self.registry)


METRICS = Metrics()
