"""Executors of the SIGTERM-with-background-work test (``test_shutdown_background.py``)."""

from __future__ import annotations

import os
import threading
from typing import Any

from signoff import ExecutionContext


def slow(context: ExecutionContext) -> dict[str, Any]:
    """Says it started; then blocks its thread for good, like a client call without a timeout —
    unless ``BG_HOOK=quick`` (the next process, finishing the work)."""
    print(f"started {context.run_id}", flush=True)
    if os.environ.get("BG_HOOK") == "quick":
        return {"done": context.input["n"]}
    threading.Event().wait()
    return {}
