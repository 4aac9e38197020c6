"""Executors for the benchmark manifests (``python: benchmarks.hooks:...``)."""

from __future__ import annotations

from typing import Any

from signoff import ExecutionContext


async def noop(context: ExecutionContext) -> dict[str, Any]:
    """Async, like the peers' tools: it runs on the event loop, no worker thread."""
    return {}
