"""The seams between the governed pipeline and the outside: stores, clock, registry.

A ``Store`` hands out units of work. Everything written inside one unit commits together when the
unit exits without error, so the pipeline decides what goes into each durable boundary while the
store only provides atomic primitives:

- ``RunStore``: ``create`` never overwrites; ``compare_and_set`` succeeds only from the expected
  version and advances it by exactly one; there is no unconditional update.
- ``DuplicateStore``: an owner-aware state machine per scope. ``reserve`` inserts a RUNNING entry or
  reports the one that exists; ``complete`` and ``release`` apply only while the caller still owns a
  RUNNING entry.
- ``AuditLog``: append-only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, TypeVar, runtime_checkable

from signoff.core.limits import LimitLedger
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun, DuplicateScope, RunStatus


class RunAlreadyExists(Exception):
    """``create`` found the run id taken; nothing was written."""


class DuplicateState(StrEnum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"


@dataclass(frozen=True, slots=True)
class DuplicateEntry:
    scope: DuplicateScope
    owner_run_id: str
    state: DuplicateState
    input_hash: str
    result: ExecutionResult | None
    created_at: datetime
    completed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """``accepted`` means the caller now owns the scope; otherwise ``existing`` is who does."""

    accepted: bool
    existing: DuplicateEntry | None = None


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One audited fact about a run: a control decision, a transition, a dispatch, a result."""

    run_id: str
    tenant_id: str
    kind: str
    at: datetime
    actor: str | None = None
    status: str | None = None
    code: str | None = None
    data: dict[str, Any] | None = None
    seq: int | None = None
    # The tenant's hash chain (``core/chain.py``), set by the store on append; ``None`` for
    # events written before the chain existed ("pre-chain").
    chain_seq: int | None = None
    prev_hash: str | None = None
    hash: str | None = None


@dataclass(frozen=True, slots=True)
class ChainHead:
    """The last link of a tenant's chain (``chain_seq`` 0 and 64 zeros: nothing yet)."""

    tenant_id: str
    chain_seq: int
    hash: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A signed statement "tenant T's chain had head H at number N" (``audit/checkpoints.py``)."""

    tenant_id: str
    chain_seq: int
    head_hash: str
    at: datetime
    key_id: str
    algorithm: str
    signature: str
    id: int | None = None
    round: int | None = None  # the round it was signed in; None: before rounds (v1)


@dataclass(frozen=True, slots=True)
class CheckpointRound:
    """One checkpoint run, signed as a whole (``audit/checkpoints.py``): every tenant's latest
    checkpointed head as of round ``round`` (1, 2, 3 ... store-wide), chained to the round
    before by ``prev_hash``. ``hash`` is the SHA-256 of what the signature covers."""

    round: int
    prev_hash: str
    heads: tuple[ChainHead, ...]
    at: datetime
    key_id: str
    algorithm: str
    signature: str
    hash: str


class RunStore(Protocol):
    async def create(self, run: ActionRun) -> None: ...
    async def get(self, run_id: str) -> ActionRun | None: ...
    async def compare_and_set(self, expected_version: int, run: ActionRun) -> ActionRun | None:
        """Write ``run`` with version ``expected_version + 1`` if the stored version matches.

        Returns the stored run on success, ``None`` when the race was lost (reload and decide).
        """
        ...

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
        """Newest first (``oldest_first``: oldest first); ``principal_id`` keeps one proposer's; ``before_run_id``/``after_run_id`` are
        exclusive bounds for paging. ``tenant_id=None`` only for operator tools and recovery.
        ``id_tail`` keeps the runs whose id's random tail starts with it (``core.short_ids``)."""
        ...


class DuplicateStore(Protocol):
    async def reserve(
        self, scope: DuplicateScope, owner_run_id: str, input_hash: str, now: datetime
    ) -> Reservation: ...
    async def complete(
        self, scope: DuplicateScope, owner_run_id: str, result: ExecutionResult, now: datetime
    ) -> bool: ...
    async def release(self, scope: DuplicateScope, owner_run_id: str) -> bool: ...
    async def get(self, scope: DuplicateScope) -> DuplicateEntry | None: ...
    async def purge_completed(self, older_than: datetime) -> int:
        """Delete COMPLETED entries completed before ``older_than``; RUNNING ones never."""
        ...


class AuditLog(Protocol):
    async def append(self, events: Sequence[AuditEvent]) -> None:
        """Append to each tenant's chain under the store's own concurrency control: concurrent
        writers never fork a chain (``chain.link`` numbers and hashes them after the head)."""
        ...

    async def list_for_run(self, run_id: str) -> list[AuditEvent]: ...
    async def scan(
        self, after_seq: int = 0, limit: int = 500, tenant_id: str | None = None
    ) -> list[AuditEvent]:
        """Events with ``seq > after_seq`` in ``seq`` order (export and verification)."""
        ...

    async def heads(self) -> list[ChainHead]:
        """Every tenant's chain head, as the store records it."""
        ...

    async def pre_chain_through(self) -> int:
        """Events up to this ``seq`` were written before the chain existed (0: none)."""
        ...

    async def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Store one checkpoint outside any round (how checkpoints were stored before rounds;
        signing goes through ``add_round``)."""
        ...

    async def checkpoints(
        self, tenant_id: str | None = None, after_id: int = 0, limit: int = 500
    ) -> list[Checkpoint]:
        """Stored checkpoints with ``id > after_id``, oldest first."""
        ...

    async def add_round(
        self, checkpoint_round: CheckpointRound, checkpoints: Sequence[Checkpoint]
    ) -> bool:
        """Store a round and the checkpoints signed in it together; ``False`` (nothing
        stored) when that round number is already taken: the store's unique key decides."""
        ...

    async def rounds(self, after_round: int = 0, limit: int = 100) -> list[CheckpointRound]:
        """Stored rounds numbered above ``after_round``, in increasing number."""
        ...

    async def latest_round(self) -> CheckpointRound | None: ...


class Liveness(StrEnum):
    """What a registry knows at once about an incarnation, without waiting for a heartbeat."""

    ALIVE = "ALIVE"
    DEAD = "DEAD"
    UNKNOWN = "UNKNOWN"
    """Neither its process nor its database session can be observed: the heartbeat decides."""


class WorkerRegistry(Protocol):
    """Liveness of runtime incarnations (``instance/incarnation``), for crash recovery.

    Not part of a unit of work: a heartbeat is its own small write. An incarnation's first
    heartbeat registers it (where it runs, and a lock its database session holds).
    """

    async def heartbeat(
        self, worker_id: str, now: datetime, revisions: Mapping[str, str] | None = None
    ) -> None:
        """Seen alive at ``now``, holding these definition revisions (action id -> revision)."""
        ...

    async def revisions(self, action_id: str, since: datetime) -> dict[str, str]:
        """The revision of ``action_id`` each incarnation seen since ``since`` holds."""
        ...

    async def last_seen(self, worker_ids: Sequence[str]) -> dict[str, datetime]: ...
    async def liveness(self, worker_ids: Sequence[str]) -> dict[str, Liveness]:
        """DEAD: its process on this host is gone or its database session ended; ALIVE: seen
        alive that way; UNKNOWN (or absent): only the heartbeat can tell."""
        ...


@dataclass(frozen=True, slots=True)
class ApprovalLink:
    """A one-time decision link as stored: only the SHA-256 of its token, never the token.

    Bound to one run at one version, one approver identity, and a short lifetime."""

    token_hash: str
    run_id: str
    run_version: int
    tenant_id: str
    approver_id: str
    approver_roles: tuple[str, ...]
    issued_at: datetime
    expires_at: datetime
    used_at: datetime | None = None


class LinkStore(Protocol):
    """Decision links. Not part of a unit of work: issuing or redeeming one is its own write."""

    async def issue(self, link: ApprovalLink) -> None: ...
    async def get(self, token_hash: str) -> ApprovalLink | None: ...
    async def redeem(self, token_hash: str, now: datetime) -> bool:
        """Mark the link used if it is unused and unexpired; ``True`` for exactly one caller."""
        ...

    async def purge(self, older_than: datetime) -> int:
        """Forget links that expired before ``older_than``."""
        ...


class StoreUnit(Protocol):
    """The ports bound to one unit of work."""

    @property
    def runs(self) -> RunStore: ...
    @property
    def duplicates(self) -> DuplicateStore: ...
    @property
    def audit(self) -> AuditLog: ...
    @property
    def limits(self) -> LimitLedger: ...


@dataclass(frozen=True, slots=True)
class Settlement:
    """What a compare-and-set that wins also writes in its unit (``SettlingUnit.settle``)."""

    at: datetime
    events: Callable[[ActionRun], list[AuditEvent]]
    """The audit to append, given the run as stored (plain computation)."""
    complete: tuple[DuplicateScope, ExecutionResult] | None = None
    """Complete this reservation (owned by the run) with this result, at ``at``."""
    release_limits: bool = False
    """Give the run's limit reservations back."""
    release_scope: DuplicateScope | None = None
    """Give this reservation (owned by the run) back instead of completing it (a repair that
    never executed); only the four-port path writes it."""


@runtime_checkable
class SettlingUnit(Protocol):
    """A unit that writes "compare-and-set; if it won, complete, release and audit" as one step.

    Exactly what ``runs.compare_and_set`` followed, on success, by ``duplicates.complete``,
    ``limits.release`` and ``audit.append`` write, with the same answers; the store may send it
    in fewer round trips (PostgreSQL: one data-modifying CTE, then the chained audit rows). A
    unit without it is driven through those four calls."""

    async def settle(
        self, expected_version: int, run: ActionRun, then: Settlement
    ) -> ActionRun | None:
        """The stored run if the compare-and-set won; ``None``: lost, nothing written."""
        ...


@runtime_checkable
class ReservingUnit(Protocol):
    """A unit that writes "reserve the scope; if that won, create the run and its audit" as one
    step: exactly ``duplicates.reserve(scope, run.run_id, run.input_hash, run.updated_at)`` and,
    when accepted, ``runs.create(run)`` and ``audit.append(events)``, with the same answers and
    errors; the store may send it in fewer round trips (PostgreSQL: the reservation with the
    chain head's lock, then the run with the chained audit rows). Not accepted: nothing else is
    written, and the caller decides what to record."""

    async def create_reserved(
        self, scope: DuplicateScope, run: ActionRun, events: Sequence[AuditEvent]
    ) -> Reservation: ...


@runtime_checkable
class Store(Protocol):
    @property
    def workers(self) -> WorkerRegistry: ...
    @property
    def links(self) -> LinkStore: ...

    def unit(self) -> AbstractAsyncContextManager[StoreUnit]:
        """A unit of work: its writes commit together on a clean exit and roll back on error."""
        ...

    async def wait_for_change(self, run_id: str, version: int, timeout: float) -> None:
        """Return when the run's version may have moved past ``version``, or after ``timeout``."""
        ...

    async def close(self) -> None: ...


T = TypeVar("T")


@runtime_checkable
class WholeUnits(Protocol):
    """A store that takes a whole unit of work at once and may run it in one hop.

    ``run_unit(body)`` is ``async with store.unit() as u: return await body(u)`` with the same
    guarantees (committed together, rolled back alone on error, answered only once durable), but
    the store may run ``body`` entirely where its writes happen: SQLite runs it on its writer
    thread, as one job, with no event loop there. ``body`` therefore awaits nothing but the
    unit's ports and is otherwise plain computation: no I/O, no sleeping, no tasks, no loop. A
    store without it is driven through ``unit()``."""

    async def run_unit(self, body: Callable[[StoreUnit], Awaitable[T]]) -> T: ...


_IMPLEMENTS: dict[tuple[type, type], bool] = {}


def implements(obj: object, protocol: type) -> bool:
    """``isinstance(obj, protocol)`` for a runtime-checkable protocol, decided once per class.

    ``typing`` walks the protocol's members on every such check (~10 µs on Python 3.11); the
    units a store hands out answer the same for every instance of their class (their methods
    are class attributes), so the answer is remembered per (class, protocol)."""
    key = (type(obj), protocol)
    found = _IMPLEMENTS.get(key)
    if found is None:
        found = _IMPLEMENTS[key] = isinstance(obj, protocol)
    return found


class Notifier(Protocol):
    """Told about approval events after they are committed. Called fire-and-forget: a slow or
    failing notifier never blocks or loses a run."""

    async def approval_requested(self, run: ActionRun) -> None: ...
    async def approval_decided(self, run: ActionRun, decision: str) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime: ...
