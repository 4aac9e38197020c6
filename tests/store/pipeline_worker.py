"""One OS process running the full governed pipeline, driven line by line over stdin/stdout.

``python -m tests.store.pipeline_worker URL EFFECTS_FILE TENANT`` prints ``ready`` once its
runtime is open and warm, then for every ``go KEY`` line proposes one call with that idempotency
key and prints the outcome as one JSON line. The executor's side effect is one line appended to
EFFECTS_FILE, so the parent can count effects across processes.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from signoff import ExecutionContext
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.factory import open_store
from tests.helpers import NO_APPROVAL, SMALL, definition, proposal


def effect_writer(path: str) -> Any:
    def cancel_invoice(context: ExecutionContext) -> dict[str, Any]:
        line = f"{context.run_id} {os.getpid()}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return {"by": os.getpid()}

    return cancel_invoice


async def main(url: str, effects: str, tenant: str) -> None:
    store = await open_store(url)
    action = definition(effect_writer(effects), approval=NO_APPROVAL)
    runtime = Runtime(ActionRegistry([action]), store)
    try:
        await runtime.propose(proposal(SMALL, key=f"warm-up-{os.getpid()}", tenant=tenant + "-w"))
        loop = asyncio.get_running_loop()
        print("ready", flush=True)
        while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            _, key = line.split(" ", 1)
            outcome = await runtime.propose(proposal(SMALL, key=key, tenant=tenant))
            print(outcome.model_dump_json(), flush=True)
        await runtime.drain()
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
