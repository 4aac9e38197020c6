"""``GET /metrics``: the Prometheus text format, with the store-derived gauges refreshed first.

Pending approvals and runs not yet final are read from the store at scrape time (all tenants,
newest first, at most ``MAX_SCANNED`` runs: past that the gauges are a lower bound and
``signoff_nonterminal_scan_truncated`` is 1), so several instances on one database report the
same numbers; counters and histograms are this process's own.
"""

from __future__ import annotations

import logging
from collections import Counter as Tally
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client import Counter, Gauge
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from signoff.core.ports import Store
from signoff.core.run import NON_TERMINAL_STATUSES, RunStatus
from signoff.core.statuses import shown_status
from signoff.observability.metrics import CONTENT_TYPE, METRICS, Metrics

PAGE = 500
MAX_SCANNED = 20_000

log = logging.getLogger("signoff.metrics")
_SCRAPE_ERRORS = Counter(
    "signoff_store_scrape_errors",
    "Scrapes that could not read the store-derived gauges (they keep their last values).",
    registry=METRICS.registry,
)
_TRUNCATED = Gauge(
    "signoff_nonterminal_scan_truncated",
    "1 when the scrape stopped counting non-final runs at its limit (the gauges are a floor).",
    registry=METRICS.registry,
)


@dataclass
class MetricsEndpoint:
    store: Store
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    metrics: Metrics = METRICS
    # (slots taken, capacity) of this process's background lane, read at scrape time.
    lane: Callable[[], tuple[int, int]] | None = None

    async def refresh(self) -> None:
        counts: Tally[RunStatus] = Tally()
        oldest: dict[RunStatus, datetime] = {}
        scanned, before, truncated = 0, None, False
        statuses = sorted(NON_TERMINAL_STATUSES)
        while True:
            async with self.store.unit() as unit:
                page = await unit.runs.list(statuses=statuses, limit=PAGE, before_run_id=before)
            for run in page:
                counts[run.status] += 1
                if run.status not in oldest or run.created_at < oldest[run.status]:
                    oldest[run.status] = run.created_at
            scanned += len(page)
            if len(page) < PAGE:
                break
            if scanned >= MAX_SCANNED:
                truncated = True
                break
            before = page[-1].run_id
        now = self.now()
        for status in statuses:
            self.metrics.nonterminal_runs.labels(status=shown_status(status)).set(counts[status])
            age = (now - oldest[status]).total_seconds() if status in oldest else 0.0
            self.metrics.nonterminal_oldest.labels(status=shown_status(status)).set(max(age, 0.0))
        self.metrics.pending_approvals.set(counts[RunStatus.WAITING_APPROVAL])
        if self.lane is not None:
            occupied, capacity = self.lane()
            self.metrics.lane_in_use.set(occupied)
            self.metrics.lane_capacity.set(capacity)
        _TRUNCATED.set(1 if truncated else 0)

    async def scrape(self, _request: Request) -> Response:
        try:
            await self.refresh()
        except Exception as exc:  # the store is down: still answer, with the last known gauges
            log.warning("metrics: could not read runs from the store (%s)", type(exc).__name__)
            _SCRAPE_ERRORS.inc()
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE)

    def route(self) -> Route:
        return Route("/metrics", self.scrape, methods=["GET"])
