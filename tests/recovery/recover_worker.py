"""One signoff instance in its own OS process: waits for ``go`` on stdin, runs recovery once,
prints its report as JSON. ``python -m tests.recovery.recover_worker URL CALLS_FILE INSTANCE``."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from typing import Any

from signoff import ExecutionContext
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.factory import open_store
from tests.helpers import NO_APPROVAL, definition


def counting_executor(path: str) -> Any:
    """Idempotent by operation id at the receiver; every *call* is still logged to count them."""

    def executor(context: ExecutionContext) -> dict[str, Any]:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{context.operation_id} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return {"by": os.getpid()}

    return executor


def shared_registry(calls: str) -> ActionRegistry:
    executor = counting_executor(calls)
    return ActionRegistry(
        [
            definition(executor, approval=NO_APPROVAL, executor_idempotent=True),
            definition(
                executor,
                id="payment.send",
                approval=NO_APPROVAL,
                mode="deferred",
                timeout=timedelta(milliseconds=1),
            ),
        ]
    )


async def main(url: str, calls: str, instance: str) -> None:
    store = await open_store(url)
    runtime = Runtime(shared_registry(calls), store, instance_id=instance)
    try:
        await runtime.heartbeat()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        report = await runtime.recover()
        print(
            json.dumps(
                {
                    "redispatched": report.redispatched,
                    "interrupted": report.interrupted,
                    "orphaned": report.orphaned,
                }
            ),
            flush=True,
        )
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
