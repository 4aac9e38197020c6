"""In-memory stores: correct under concurrency inside one process, and nothing more.

What they do NOT promise: anything survives a restart; several processes share anything; a unit of
work rolls back (writes take effect as they are made, so an error inside a unit leaves what was
already written). Use them for tests and tiny demos; the SQL stores are the durable ones.

Each operation takes one ``threading.Lock`` for the duration of a dictionary update and never holds
it across an ``await``, so it is safe from several event loops and threads alike.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from typing import TypeVar

from signoff.core.chain import GENESIS, by_tenant, head_after, link
from signoff.core.ports import (
    ApprovalLink,
    AuditEvent,
    ChainHead,
    Checkpoint,
    CheckpointRound,
    DuplicateEntry,
    DuplicateState,
    Liveness,
    Reservation,
    RunAlreadyExists,
    StoreUnit,
)
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun, DuplicateScope, RunStatus
from signoff.core.short_ids import has_tail
from signoff.store.memory_limits import InMemoryLimitLedger, InMemoryLimitRows

T = TypeVar("T")


class _ChangeNotifier:
    """Wakes ``wait_for_change`` callers, whichever event loop they wait on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = {}

    def notify(self, run_id: str) -> None:
        with self._lock:
            waiters = self._waiters.pop(run_id, [])
        for loop, future in waiters:
            loop.call_soon_threadsafe(_resolve, future)

    async def wait(self, run_id: str, timeout: float, changed: Callable[[], bool]) -> None:
        """Wait for a notification about ``run_id``; ``changed`` is checked after registering,
        so a change that lands between the caller's read and this wait is never missed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = (loop, future)
        with self._lock:
            self._waiters.setdefault(run_id, []).append(entry)
        try:
            if not changed():
                await asyncio.wait_for(future, timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                waiters = self._waiters.get(run_id)
                if waiters and entry in waiters:
                    waiters.remove(entry)
                    if not waiters:
                        del self._waiters[run_id]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class InMemoryRunStore:
    def __init__(self, notifier: _ChangeNotifier | None = None) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, ActionRun] = {}
        self._notifier = notifier or _ChangeNotifier()

    async def create(self, run: ActionRun) -> None:
        with self._lock:
            if run.run_id in self._runs:
                raise RunAlreadyExists(run.run_id)
            self._runs[run.run_id] = run
        self._notifier.notify(run.run_id)

    async def get(self, run_id: str) -> ActionRun | None:
        return self._runs.get(run_id)

    def peek(self, run_id: str) -> ActionRun | None:
        return self._runs.get(run_id)

    async def compare_and_set(self, expected_version: int, run: ActionRun) -> ActionRun | None:
        stored_run = run.model_copy(update={"version": expected_version + 1})
        with self._lock:
            current = self._runs.get(run.run_id)
            if current is None or current.version != expected_version or current.is_terminal:
                return None
            self._runs[run.run_id] = stored_run
        self._notifier.notify(run.run_id)
        return stored_run

    async def list(
        self,
        tenant_id: str | None = None,
        statuses: Sequence[RunStatus] | None = None,
        limit: int = 100,
        before_run_id: str | None = None,
        *,
        after_run_id: str | None = None,
        oldest_first: bool = False,
        principal_id: str | None = None,
        id_tail: str | None = None,
    ) -> list[ActionRun]:
        with self._lock:
            runs = list(self._runs.values())
        wanted = set(statuses) if statuses else None
        selected = [
            r
            for r in runs
            if (tenant_id is None or r.tenant_id == tenant_id)
            and (wanted is None or r.status in wanted)
            and (before_run_id is None or r.run_id < before_run_id)
            and (after_run_id is None or r.run_id > after_run_id)
            and (principal_id is None or r.principal.id == principal_id)
            and (id_tail is None or has_tail(r.run_id, id_tail))
        ]
        selected.sort(key=lambda r: r.run_id, reverse=not oldest_first)
        return selected[: max(limit, 0)]


class InMemoryDuplicateStore:
    """One owner-aware entry per scope; every transition happens under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[DuplicateScope, DuplicateEntry] = {}

    async def reserve(
        self, scope: DuplicateScope, owner_run_id: str, input_hash: str, now: datetime
    ) -> Reservation:
        with self._lock:
            existing = self._entries.get(scope)
            if existing is not None:
                return Reservation(accepted=False, existing=existing)
            self._entries[scope] = DuplicateEntry(
                scope=scope,
                owner_run_id=owner_run_id,
                state=DuplicateState.RUNNING,
                input_hash=input_hash,
                result=None,
                created_at=now,
            )
            return Reservation(accepted=True)

    async def complete(
        self, scope: DuplicateScope, owner_run_id: str, result: ExecutionResult, now: datetime
    ) -> bool:
        with self._lock:
            entry = self._entries.get(scope)
            if (
                entry is None
                or entry.owner_run_id != owner_run_id
                or entry.state is not DuplicateState.RUNNING
            ):
                return False
            self._entries[scope] = DuplicateEntry(
                scope=scope,
                owner_run_id=owner_run_id,
                state=DuplicateState.COMPLETED,
                input_hash=entry.input_hash,
                result=result,
                created_at=entry.created_at,
                completed_at=now,
            )
            return True

    async def release(self, scope: DuplicateScope, owner_run_id: str) -> bool:
        with self._lock:
            entry = self._entries.get(scope)
            if (
                entry is None
                or entry.owner_run_id != owner_run_id
                or entry.state is not DuplicateState.RUNNING
            ):
                return False
            del self._entries[scope]
            return True

    async def get(self, scope: DuplicateScope) -> DuplicateEntry | None:
        return self._entries.get(scope)

    async def purge_completed(self, older_than: datetime) -> int:
        with self._lock:
            doomed = [
                scope
                for scope, entry in self._entries.items()
                if entry.state is DuplicateState.COMPLETED
                and entry.completed_at is not None
                and entry.completed_at < older_than
            ]
            for scope in doomed:
                del self._entries[scope]
        return len(doomed)


class InMemoryAuditLog:
    """The same chain as the SQL store (``core/chain.link``), appended under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[AuditEvent] = []
        self._by_run: dict[str, list[AuditEvent]] = {}
        self._heads: dict[str, ChainHead] = {}
        self._checkpoints: list[Checkpoint] = []
        self._rounds: dict[int, CheckpointRound] = {}

    async def append(self, events: Sequence[AuditEvent]) -> None:
        with self._lock:
            for tenant_id, batch in by_tenant(events):
                head = self._heads.get(tenant_id, ChainHead(tenant_id, 0, GENESIS))
                linked = link(head, batch, first_seq=len(self._events) + 1)
                for stored in linked:
                    self._events.append(stored)
                    self._by_run.setdefault(stored.run_id, []).append(stored)
                self._heads[tenant_id] = head_after(head, linked)

    async def list_for_run(self, run_id: str) -> list[AuditEvent]:
        with self._lock:
            return list(self._by_run.get(run_id, ()))

    async def scan(
        self, after_seq: int = 0, limit: int = 500, tenant_id: str | None = None
    ) -> list[AuditEvent]:
        with self._lock:
            found = [
                e
                for e in self._events[max(after_seq, 0) :]
                if tenant_id is None or e.tenant_id == tenant_id
            ]
        return found[: max(limit, 0)]

    async def heads(self) -> list[ChainHead]:
        with self._lock:
            return sorted(self._heads.values(), key=lambda head: head.tenant_id)

    async def pre_chain_through(self) -> int:
        return 0

    async def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self._lock:
            self._checkpoints.append(replace(checkpoint, id=len(self._checkpoints) + 1))

    async def checkpoints(
        self, tenant_id: str | None = None, after_id: int = 0, limit: int = 500
    ) -> list[Checkpoint]:
        with self._lock:
            found = [
                c
                for c in self._checkpoints[max(after_id, 0) :]
                if tenant_id is None or c.tenant_id == tenant_id
            ]
        return found[: max(limit, 0)]

    async def add_round(
        self, checkpoint_round: CheckpointRound, checkpoints: Sequence[Checkpoint]
    ) -> bool:
        with self._lock:
            if checkpoint_round.round in self._rounds:
                return False
            self._rounds[checkpoint_round.round] = checkpoint_round
            for checkpoint in checkpoints:
                self._checkpoints.append(replace(checkpoint, id=len(self._checkpoints) + 1))
            return True

    async def rounds(self, after_round: int = 0, limit: int = 100) -> list[CheckpointRound]:
        with self._lock:
            numbers = sorted(n for n in self._rounds if n > after_round)[: max(limit, 0)]
            return [self._rounds[n] for n in numbers]

    async def latest_round(self) -> CheckpointRound | None:
        with self._lock:
            return self._rounds[max(self._rounds)] if self._rounds else None


class InMemoryWorkerRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, datetime] = {}
        self._revisions: dict[str, dict[str, str]] = {}

    async def heartbeat(
        self, worker_id: str, now: datetime, revisions: Mapping[str, str] | None = None
    ) -> None:
        with self._lock:
            self._seen[worker_id] = now
            if revisions is not None:
                self._revisions[worker_id] = dict(revisions)

    async def revisions(self, action_id: str, since: datetime) -> dict[str, str]:
        with self._lock:
            return {
                worker: held[action_id]
                for worker, held in self._revisions.items()
                if self._seen.get(worker, since) > since and action_id in held
            }

    async def last_seen(self, worker_ids: Sequence[str]) -> dict[str, datetime]:
        with self._lock:
            return {w: self._seen[w] for w in worker_ids if w in self._seen}

    async def liveness(self, worker_ids: Sequence[str]) -> dict[str, Liveness]:
        """Memory is one process's: nothing beyond the heartbeat to observe."""
        return {}


class _Unit:
    def __init__(self, store: InMemoryStore) -> None:
        self.runs = store.runs
        self.duplicates = store.duplicates
        self.audit = store.audit
        self.limits = InMemoryLimitLedger(store.limit_rows)


class InMemoryLinkStore:
    """Decision links in a dict; redeeming is one locked check-and-set."""

    def __init__(self) -> None:
        self._links: dict[str, ApprovalLink] = {}
        self._lock = threading.Lock()

    async def issue(self, link: ApprovalLink) -> None:
        with self._lock:
            self._links.setdefault(link.token_hash, link)

    async def get(self, token_hash: str) -> ApprovalLink | None:
        with self._lock:
            return self._links.get(token_hash)

    async def redeem(self, token_hash: str, now: datetime) -> bool:
        with self._lock:
            link = self._links.get(token_hash)
            if link is None or link.used_at is not None or link.expires_at <= now:
                return False
            self._links[token_hash] = dataclasses.replace(link, used_at=now)
            return True

    async def purge(self, older_than: datetime) -> int:
        with self._lock:
            gone = [h for h, link in self._links.items() if link.expires_at < older_than]
            for token_hash in gone:
                del self._links[token_hash]
            return len(gone)


class InMemoryStore:
    """All three ports in memory; a unit of work is immediate (see the module docstring)."""

    def __init__(self) -> None:
        self._notifier = _ChangeNotifier()
        self.runs = InMemoryRunStore(self._notifier)
        self.duplicates = InMemoryDuplicateStore()
        self.audit = InMemoryAuditLog()
        self.workers = InMemoryWorkerRegistry()
        self.links = InMemoryLinkStore()
        self.limit_rows = InMemoryLimitRows()

    @asynccontextmanager
    async def unit(self) -> AsyncIterator[StoreUnit]:
        unit = _Unit(self)
        try:
            yield unit
        finally:
            unit.limits.finish()

    async def run_unit(self, body: Callable[[StoreUnit], Awaitable[T]]) -> T:
        """A whole unit (``WholeUnits``): memory has no hop to save, so it is ``unit()``'s."""
        async with self.unit() as unit:
            return await body(unit)

    async def wait_for_change(self, run_id: str, version: int, timeout: float) -> None:
        def changed() -> bool:
            current = self.runs.peek(run_id)
            return current is not None and current.version != version

        await self._notifier.wait(run_id, timeout, changed)

    async def close(self) -> None:
        return None
