"""Executors for the benchmark manifests (``python: benchmarks.hooks:...``)."""

from __future__ import annotations

from typing import Any

from signoff import ExecutionContext


def noop(context: ExecutionContext) -> dict[str, Any]:
    return {}
