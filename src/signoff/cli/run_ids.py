"""Run ids on the command line: the whole id, or its short form (``core.short_ids``).

Tables show a run's short id, the last 12 characters of its id (the random part of a UUIDv7);
any command that takes a run id accepts the whole id, the short id, or any start of the short id
of at least 6 characters. On the database (operator tools) a short id is looked up in ``--tenant``
(every tenant without one); with ``--server`` the server resolves it among the runs the token's
approver may see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from signoff.cli.plumbing import fail

if TYPE_CHECKING:
    from signoff.core.ports import Store


async def resolve_run_id(store: Store, given: str, tenant: str | None) -> str | None:
    """The run id ``given`` stands for in ``tenant`` (``None``: any tenant), or ``None`` when no
    run matches. Several runs matching is a refusal naming them."""
    from signoff.core.short_ids import RUN_ID_AMBIGUOUS, short_id, tail_start

    wanted = given.strip().lower()
    async with store.unit() as unit:
        exact = await unit.runs.get(wanted)
        if exact is not None and (tenant is None or exact.tenant_id == tenant):
            return wanted
        start = tail_start(wanted)
        if start is None:
            return None
        found = await unit.runs.list(tenant_id=tenant, limit=3, id_tail=start)
    if len(found) > 1:
        shown = ", ".join(short_id(r.run_id) for r in found[:2])
        fail(
            f"{given} starts the short id of several runs ({shown}, ...): give more of it",
            RUN_ID_AMBIGUOUS,
        )
    return found[0].run_id if found else None
