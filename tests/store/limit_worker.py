"""One OS process racing for a cumulative limit, released together with its sibling.

``python -m tests.store.limit_worker URL TENANT CONTENDERS`` prints ``ready``, waits for one
``go`` line, then runs CONTENDERS concurrent reservations of the count-5 / sum-1000 limit of
``tests.store.test_limits.LIMIT`` (amount 100 each) and prints how many were accepted.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime

from signoff.core.limits import reserve
from signoff.store.factory import open_store
from tests.store.test_limits import check_for


async def main(url: str, tenant: str, contenders: int) -> None:
    store = await open_store(url, upgrade=False)
    try:
        async with store.unit() as unit:
            await unit.limits.usage("warm-up", datetime.now(UTC))
        loop = asyncio.get_running_loop()
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)

        async def contend(n: int) -> bool:
            async with store.unit() as unit:
                decision = await reserve(
                    unit.limits, [check_for(tenant)], f"run-{os.getpid()}-{n}", datetime.now(UTC)
                )
            return not decision.exceeded

        results = await asyncio.gather(*(contend(n) for n in range(contenders)))
        print(sum(results), flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
