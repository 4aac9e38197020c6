"""One OS process appending audit events, released together with its sibling over stdin.

``python -m tests.store.audit_worker URL TENANT WRITERS`` prints ``ready`` once its store is
open and warm, waits for one ``go`` line, then appends from WRITERS concurrent units of work (two
events each, into TENANT's chain), prints ``done`` and exits.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime

from signoff.core.ports import AuditEvent
from signoff.store.factory import open_store


async def main(url: str, tenant: str, writers: int) -> None:
    store = await open_store(url, upgrade=False)
    try:
        async with store.unit() as unit:  # warm the pool and the statement cache
            await unit.audit.heads()
        loop = asyncio.get_running_loop()
        print("ready", flush=True)
        await loop.run_in_executor(None, sys.stdin.readline)

        async def write(n: int) -> None:
            run_id = f"run-{os.getpid()}-{n}"
            now = datetime.now(UTC)
            async with store.unit() as unit:
                await unit.audit.append(
                    [
                        AuditEvent(run_id=run_id, tenant_id=tenant, kind="proposed", at=now),
                        AuditEvent(run_id=run_id, tenant_id=tenant, kind="refused", at=now),
                    ]
                )

        await asyncio.gather(*(write(n) for n in range(writers)))
        print("done", flush=True)
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
