"""Cumulative limits (``spec.limits``, contract §6): how much one subject used in a window.

A limit counts the calls of one action per subject (principal, tenant or resource) in a sliding
window, and/or sums a CEL number over them. Usage is the set of *reservations* the store holds
for the limit's subject in the window: a run reserves in the same unit of work as its duplicate
reservation, keeps the reservation when it executed (or may have), and releases it when it ends
without executing. Sliding-window usage is computed from the reservation rows themselves, so no
cleanup job is needed for correctness; old rows are only garbage.

Atomicity: ``reserve`` asks the store to *lock* each limit's subject (a counter row with a row
lock; SQLite's single writer) before reading its usage, decides here, then holds the reservation
in the same unit, so two racing runs can never both take the last unit of a limit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator


class LimitSubject(StrEnum):
    PRINCIPAL = "principal"
    TENANT = "tenant"
    RESOURCE = "resource"


class OnExceed(StrEnum):
    APPROVAL = "approval"
    DENY = "deny"


class LimitSpec(BaseModel):
    """One entry of ``spec.limits``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    per: LimitSubject = LimitSubject.PRINCIPAL
    window: timedelta
    count: int | None = Field(default=None, ge=0)
    sum: str | None = None
    max: float | None = Field(default=None, ge=0)
    on_exceed: OnExceed = OnExceed.APPROVAL

    @model_validator(mode="after")
    def _bounds(self) -> LimitSpec:
        if self.window <= timedelta(0):
            raise ValueError("window must be positive")
        if (self.sum is None) != (self.max is None):
            raise ValueError("sum and max go together: sum is the CEL number, max its bound")
        if self.count is None and self.sum is None:
            raise ValueError("a limit needs count and/or sum with max")
        return self


@dataclass(frozen=True, slots=True)
class LimitEntry:
    """One reservation inside a window: when, and how much it adds to the sum."""

    run_id: str
    reserved_at: datetime
    amount: float


@dataclass(frozen=True, slots=True)
class LimitCheck:
    """One limit applied to one call: its subject key and what the call would add."""

    spec: LimitSpec
    action_id: str
    tenant_id: str
    subject: str
    amount: float = 0.0

    @property
    def key(self) -> str:
        """The store's key for (tenant, action, limit, subject): a SHA-256, any length of id."""
        parts = [self.tenant_id, self.action_id, self.spec.name, self.spec.per.value, self.subject]
        return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class LimitUsage:
    """A limit's usage in its window as seen by one call (before it is added)."""

    check: LimitCheck
    count: int
    total: float
    over_count: int = 0
    over_sum: float = 0.0
    frees_at: datetime | None = None

    @property
    def exceeded(self) -> bool:
        return self.over_count > 0 or self.over_sum > 0

    def describe(self) -> str:
        """Which limit and how far over, for the approval reason or the refusal message."""
        spec = self.check.spec
        parts: list[str] = []
        if spec.count is not None:
            parts.append(f"{self.count + 1} of {spec.count} calls")
        if spec.max is not None:
            parts.append(f"{_num(self.total + self.check.amount)} of {_num(spec.max)}")
        text = f"limit {spec.name!r} (per {spec.per.value}, {_window(spec.window)}): "
        text += " and ".join(parts)
        if self.exceeded:
            over = []
            if self.over_count:
                over.append(f"{self.over_count} call{'s' if self.over_count > 1 else ''}")
            if self.over_sum:
                over.append(_num(self.over_sum))
            text += f", over by {' and '.join(over)}"
        return text

    def frees_up(self) -> str:
        if self.frees_at is None:
            return "it does not free up in this window: the call alone is over the limit"
        return f"it frees up at {self.frees_at.isoformat().replace('+00:00', 'Z')}"


def _num(value: float) -> str:
    return f"{value:g}"


def _window(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def measure_totals(check: LimitCheck, count: int, total: float) -> LimitUsage:
    """Usage from totals alone (manifest ``tests:`` cases set them): no ``frees_at``."""
    spec = check.spec
    over_count = max(0, count + 1 - spec.count) if spec.count is not None else 0
    over_sum = max(0.0, total + check.amount - spec.max) if spec.max is not None else 0.0
    return LimitUsage(check, count, total, over_count, over_sum)


def measure(check: LimitCheck, entries: Sequence[LimitEntry], now: datetime) -> LimitUsage:
    """Usage of ``check``'s limit from the reservations in its window, and whether the call fits.

    Exactly at ``count`` / ``max`` fits; one more does not. ``frees_at`` is the first instant at
    which enough of the oldest reservations have slid out of the window for the call to fit.
    """
    spec = check.spec
    since = now - spec.window
    window = sorted((e for e in entries if e.reserved_at > since), key=lambda e: e.reserved_at)
    count = len(window)
    total = sum(e.amount for e in window)
    over_count = max(0, count + 1 - spec.count) if spec.count is not None else 0
    over_sum = max(0.0, total + check.amount - spec.max) if spec.max is not None else 0.0
    frees_at: datetime | None = None
    if over_count or over_sum:
        alone_fits = (spec.count is None or spec.count >= 1) and (
            spec.max is None or check.amount <= spec.max
        )
        if alone_fits:
            left_count, left_sum = count, total
            for entry in window:
                left_count -= 1
                left_sum -= entry.amount
                fits_count = spec.count is None or left_count + 1 <= spec.count
                fits_sum = spec.max is None or left_sum + check.amount <= spec.max
                if fits_count and fits_sum:
                    frees_at = entry.reserved_at + spec.window
                    break
    return LimitUsage(check, count, total, over_count, over_sum, frees_at)


class LimitLedger(Protocol):
    """The store's side (``StoreUnit.limits``): atomic per subject inside one unit of work."""

    async def lock_totals(self, key: str, since: datetime, exclude_run: str) -> tuple[int, float]:
        """Lock the subject ``key`` until the unit ends, then count and sum its reservations
        after ``since`` (other than ``exclude_run``'s)."""
        ...

    async def usage(self, key: str, since: datetime) -> list[LimitEntry]:
        """The same, without locking (for display)."""
        ...

    async def hold(
        self, key: str, tenant_id: str, run_id: str, amount: float, now: datetime
    ) -> None:
        """Record ``run_id``'s reservation of ``key`` of ``amount`` at ``now``, or replace the
        amount and time of the one it holds: a reservation counts in the window from the last
        time its limits were checked (the proposal, an amendment, the dispatch after approval),
        so what executes in any window is what that window's usage counted."""
        ...

    async def release(self, run_id: str) -> int:
        """Drop every reservation of ``run_id`` (it ends without executing)."""
        ...

    async def purge(self, older_than: datetime) -> int:
        """Delete reservations made before ``older_than`` (garbage only: outside any window)."""
        ...


@dataclass(frozen=True, slots=True)
class LimitDecision:
    usages: tuple[LimitUsage, ...]

    @property
    def exceeded(self) -> tuple[LimitUsage, ...]:
        return tuple(u for u in self.usages if u.exceeded)

    @property
    def denied(self) -> tuple[LimitUsage, ...]:
        return tuple(u for u in self.exceeded if u.check.spec.on_exceed is OnExceed.DENY)

    @property
    def needs_approval(self) -> bool:
        return bool(self.exceeded) and not self.denied


async def reserve(
    ledger: LimitLedger,
    checks: Sequence[LimitCheck],
    run_id: str,
    now: datetime,
    *,
    hold_when_exceeded: bool = True,
) -> LimitDecision:
    """Lock every subject (sorted: a fixed lock order), measure, and hold the reservations.

    Nothing is held when a ``deny`` limit is exceeded. A call over an ``approval`` limit is held
    (it will execute if approved, so it counts against the calls after it) unless
    ``hold_when_exceeded`` is false.
    """
    usages: list[LimitUsage] = []
    for check in sorted(checks, key=lambda c: c.key):
        since = now - check.spec.window
        count, total = await ledger.lock_totals(check.key, since, run_id)
        usage = measure_totals(check, count, total)
        if usage.exceeded:  # only now read the rows, to say when it frees up
            entries = await ledger.usage(check.key, since)
            usage = measure(check, [e for e in entries if e.run_id != run_id], now)
        usages.append(usage)
    decision = LimitDecision(tuple(usages))
    if decision.denied or (decision.exceeded and not hold_when_exceeded):
        return decision
    for usage in usages:
        check = usage.check
        await ledger.hold(check.key, check.tenant_id, run_id, check.amount, now)
    return decision


def subject_of(spec: LimitSpec, tenant_id: str, principal_id: str, resource: str | None) -> str:
    """Whose calls count together under ``spec``; a resource limit needs the resource."""
    if spec.per is LimitSubject.TENANT:
        return tenant_id
    if spec.per is LimitSubject.RESOURCE:
        if resource is None:
            raise ValueError(f"limit {spec.name!r} is per resource: name the resource")
        return resource
    return principal_id


async def current_usage(
    ledger: LimitLedger, checks: Sequence[LimitCheck], now: datetime
) -> list[LimitUsage]:
    """Each limit's usage now, without locking or reserving (operators, the API)."""
    return [
        measure(check, await ledger.usage(check.key, now - check.spec.window), now)
        for check in checks
    ]


def usage_record(usage: LimitUsage) -> dict[str, object]:
    """A limit's usage as JSON (``signoff limits usage --json``, ``GET /api/limits``)."""
    spec = usage.check.spec
    return {
        "limit": spec.name,
        "action": usage.check.action_id,
        "per": spec.per.value,
        "subject": usage.check.subject,
        "window_seconds": spec.window.total_seconds(),
        "count": usage.count,
        "count_max": spec.count,
        "sum": usage.total if spec.sum is not None else None,
        "sum_max": spec.max,
        "on_exceed": spec.on_exceed.value,
    }
