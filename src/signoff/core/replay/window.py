"""``WindowLedger``: the replay's ``LimitLedger``, in memory, holding only what windows need.

``limits.reserve`` — the pipeline's own lock, measure and hold — runs against it, so a replayed
call is measured exactly as the pipeline measured the original. Each subject keeps its live
reservations (by run) and running totals; reservations that slid out of the subject's window
are pruned as the replay's clock moves on, so memory follows what one window holds, not the
length of the history. ``lock_totals`` needs no lock: the replay is one task.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction

from signoff.core.limits import LimitEntry

SKEW = timedelta(minutes=5)
"""Reservations are kept this long past their window, so a call stamped a little earlier than
the one before it (two instances' clocks) still counts them."""


@dataclass(slots=True)
class _Subject:
    live: dict[str, LimitEntry] = field(default_factory=dict)
    order: deque[LimitEntry] = field(default_factory=deque)
    count: int = 0
    # Exact (a float's value is a fraction): adding and taking back never drifts, so a sum that
    # lands exactly on ``max`` fits as it did in the pipeline.
    total: Fraction = field(default_factory=Fraction)


class WindowLedger:
    """Reservations per subject key, pruned past ``since - SKEW`` on every measurement."""

    def __init__(self) -> None:
        self._subjects: dict[str, _Subject] = {}
        self._by_run: dict[str, set[str]] = {}

    # --------------------------------------------------------- LimitLedger
    async def lock_totals(self, key: str, since: datetime, exclude_run: str) -> tuple[int, float]:
        subject = self._subjects.get(key)
        if subject is None:
            return 0, 0.0
        self._prune(key, subject, since - SKEW)
        count, total = subject.count, subject.total
        for entry in subject.order:  # kept but already outside this window
            if entry.reserved_at > since:
                break
            if subject.live.get(entry.run_id) is entry:
                count -= 1
                total -= Fraction(entry.amount)
        own = subject.live.get(exclude_run)
        if own is not None and own.reserved_at > since:
            count -= 1
            total -= Fraction(own.amount)
        return count, float(total)

    async def usage(self, key: str, since: datetime) -> list[LimitEntry]:
        subject = self._subjects.get(key)
        if subject is None:
            return []
        return [e for e in subject.live.values() if e.reserved_at > since]

    async def hold(
        self, key: str, tenant_id: str, run_id: str, amount: float, now: datetime
    ) -> None:
        subject = self._subjects.setdefault(key, _Subject())
        self._drop(subject, run_id)
        entry = LimitEntry(run_id, now, amount)
        subject.live[run_id] = entry
        subject.order.append(entry)
        subject.count += 1
        subject.total += Fraction(amount)
        self._by_run.setdefault(run_id, set()).add(key)

    async def release(self, run_id: str) -> int:
        keys = self._by_run.pop(run_id, set())
        dropped = 0
        for key in keys:
            subject = self._subjects.get(key)
            if subject is not None and self._drop(subject, run_id):
                dropped += 1
        return dropped

    async def purge(self, older_than: datetime) -> int:  # pragma: no cover - pruned as it goes
        return 0

    # ------------------------------------------------------------ internals
    @property
    def size(self) -> int:
        """Reservations held in memory (subjects' live entries), for the benchmark."""
        return sum(len(s.live) for s in self._subjects.values())

    def _drop(self, subject: _Subject, run_id: str) -> bool:
        entry = subject.live.pop(run_id, None)
        if entry is None:
            return False
        subject.count -= 1
        subject.total -= Fraction(entry.amount)
        return True  # its place in ``order`` is skipped when pruned (``live`` no longer has it)

    def _prune(self, key: str, subject: _Subject, before: datetime) -> None:
        order = subject.order
        while order and order[0].reserved_at <= before:
            entry = order.popleft()
            if subject.live.get(entry.run_id) is entry:
                del subject.live[entry.run_id]
                subject.count -= 1
                subject.total -= Fraction(entry.amount)
                runs = self._by_run.get(entry.run_id)
                if runs is not None:
                    runs.discard(key)
                    if not runs:
                        del self._by_run[entry.run_id]
        if not subject.live and not order:
            del self._subjects[key]
