"""PostgreSQL: each tenant's chain head as this store last committed it, and whose turn it is.

A governed call's two units each append chained audit rows, whose hashes are computed in Python
from the tenant's chain head. Read under its lock, the head costs a statement of its own before
the rows can be sent. Known in advance, it does not: the unit's whole write is then ONE
statement (``postgres_unit.py``) that moves the head only if it is still exactly the head
assumed - ``UPDATE ... WHERE chain_seq = :assumed AND head_hash = :assumed``, re-checked by
PostgreSQL against the latest committed row after waiting for its lock - and inserts the rows
only if it moved. Otherwise (another process or unit moved it) the same unit locks the head and
appends after it the ordinary way: the cache is a hint, never trusted for the chain itself.

``ChainHeads`` keeps, per tenant, the head the last unit of this store that set it committed
(the highest number wins, so commits recorded out of order cannot go back), and the tenant's
**turn**: a unit that begins with such a write waits for the tenant's turn in this process
(holding no connection lock and no other turn, so the wait cannot close a cycle) and keeps it
until it ended, so this process's writers of one tenant queue here - where they would otherwise
queue on the head row - and each finds the head its predecessor committed. A unit that already
sent a statement only takes a free turn, never waits for one.

A head found moved is forgotten and the tenant's cache is skipped for the next 1, 3, 7, ...
(at most 63) of its units, so writers of one tenant in several processes fall back to locking
the head first instead of paying for a failed guess each time.
"""

from __future__ import annotations

import asyncio

from signoff.core.ports import ChainHead

_MAX_TENANTS = 10_000
_MAX_BACKOFF = 6


class ChainHeads:
    """One store's committed chain heads and per-tenant turns (one event loop)."""

    __slots__ = ("_heads", "_misses", "_skip", "_turns")

    def __init__(self) -> None:
        self._heads: dict[str, ChainHead] = {}
        self._misses: dict[str, int] = {}
        self._skip: dict[str, int] = {}
        self._turns: dict[str, list[asyncio.Future[None]]] = {}

    def get(self, tenant_id: str) -> ChainHead | None:
        """The head to assume for ``tenant_id``; ``None``: lock it and read it instead."""
        skip = self._skip.get(tenant_id)
        if skip is not None:
            if skip <= 1:
                del self._skip[tenant_id]
            else:
                self._skip[tenant_id] = skip - 1
            return None
        return self._heads.get(tenant_id)

    def committed(self, head: ChainHead) -> None:
        """A unit that set this head committed."""
        known = self._heads.get(head.tenant_id)
        if known is None and len(self._heads) >= _MAX_TENANTS:
            self._heads.clear()
        if known is None or head.chain_seq > known.chain_seq:
            self._heads[head.tenant_id] = head

    def hit(self, tenant_id: str) -> None:
        """The assumed head was the head."""
        self._misses.pop(tenant_id, None)

    def moved(self, tenant_id: str) -> None:
        """The assumed head was not the head: forget it, and skip the cache for a while."""
        self._heads.pop(tenant_id, None)
        if len(self._misses) >= _MAX_TENANTS:
            self._misses.clear()
            self._skip.clear()
        misses = min(self._misses.get(tenant_id, 0) + 1, _MAX_BACKOFF)
        self._misses[tenant_id] = misses
        self._skip[tenant_id] = 2**misses - 1

    def try_turn(self, tenant_id: str) -> bool:
        """Take the tenant's turn if nobody holds it."""
        if tenant_id in self._turns:
            return False
        self._turns[tenant_id] = []
        return True

    async def turn(self, tenant_id: str) -> None:
        """Wait for the tenant's turn (first come, first served) and take it."""
        waiters = self._turns.get(tenant_id)
        if waiters is None:
            self._turns[tenant_id] = []
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(tenant_id)  # handed over just as the wait was cancelled
            elif waiter in waiters:
                waiters.remove(waiter)
            raise

    def release(self, tenant_id: str) -> None:
        """Hand the tenant's turn to the next waiter, or free it."""
        waiters = self._turns.get(tenant_id)
        if waiters is None:
            return
        while waiters:
            waiter = waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return
        del self._turns[tenant_id]
