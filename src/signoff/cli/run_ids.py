"""Run ids on the command line: the whole id, or any unique start of it (at least 6 characters).

Run ids are UUIDv7 strings and the stores list them in id order, so the runs whose id starts
with a prefix are the newest ones below ``prefix + "~"`` (``~`` sorts after every character of
an id): one indexed query of two rows tells none, one, or several.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from signoff.cli.plumbing import fail

if TYPE_CHECKING:
    from signoff.core.ports import Store

MIN_PREFIX = 6


async def resolve_run_id(store: Store, given: str, tenant: str | None) -> str | None:
    """The run id ``given`` stands for in ``tenant`` (``None``: any tenant), or ``None`` when no
    run matches. Several runs starting with ``given`` is a refusal naming two of them."""
    wanted = given.strip().lower()
    async with store.unit() as unit:
        exact = await unit.runs.get(wanted)
        if exact is not None and (tenant is None or exact.tenant_id == tenant):
            return wanted
        if len(wanted) < MIN_PREFIX:
            return None
        found = await unit.runs.list(tenant_id=tenant, limit=2, before_run_id=wanted + "~")
    matching = [r.run_id for r in found if r.run_id.startswith(wanted)]
    if len(matching) > 1:
        fail(
            f"{given} is the start of several run ids ({', '.join(matching)}, ...): "
            "give more of it",
            "RUN_ID_AMBIGUOUS",
        )
    return matching[0] if matching else None
