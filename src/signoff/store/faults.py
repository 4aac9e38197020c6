"""Rows a store cannot decode: skipped by every reader, logged once with their id, counted.

A row can become undecodable through a bug, a manual edit or data written by an older signoff
that accepted more than today's limits. One such row must never stop a list, the inbox, the
expiry sweeper, recovery or a server start, so readers skip it and record it here;
``signoff audit verify`` reports what was recorded, and the counter is the metric
``signoff_undecodable_rows_total``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from signoff.observability import record_undecodable_row

log = logging.getLogger("signoff.store")

METRIC_NAME = "signoff_undecodable_rows_total"


@dataclass(frozen=True, slots=True)
class UndecodableRow:
    table: str
    row_id: str
    error: str


class DecodeFaults:
    """Per store: which rows could not be decoded (first error each), and how often."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[tuple[str, str], UndecodableRow] = {}
        self.skipped_total = 0

    def record(self, table: str, row_id: str, exc: BaseException) -> None:
        # The error text is the library's (pydantic, JSON parser): operators read it in the log
        # and in `audit verify`; it never reaches an agent. Bounded so one row cannot flood logs.
        text = " ".join(line.strip() for line in str(exc).splitlines()[:2])
        error = f"{type(exc).__name__}: {text[:200]}"
        record_undecodable_row(table)
        with self._lock:
            self.skipped_total += 1
            key = (table, row_id)
            first = key not in self._rows
            if first:
                self._rows[key] = UndecodableRow(table, row_id, error)
        if first:
            log.error("skipping undecodable %s row %r: %s", table, row_id, error)

    def rows(self) -> list[UndecodableRow]:
        with self._lock:
            return list(self._rows.values())
