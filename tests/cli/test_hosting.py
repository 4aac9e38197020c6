"""What every server does once start-up is over, before it serves."""

from __future__ import annotations

import gc
from pathlib import Path

from signoff.app import Application
from signoff.cli.hosting import serve_application
from signoff.demo import MANIFESTS as DEMO_MANIFESTS

ROOT = Path(__file__).resolve().parents[2]


def test_the_start_up_heap_is_frozen_out_of_the_collector_before_serving(tmp_path: Path) -> None:
    seen: list[int] = []

    async def body(application: Application) -> None:
        seen.append(gc.get_freeze_count())

    gc.unfreeze()  # whatever ran before in this process starts tracked again
    try:
        serve_application(f"sqlite+aiosqlite:///{tmp_path / 'h.db'}", str(DEMO_MANIFESTS), body)
    finally:
        gc.unfreeze()
    # Everything start-up left alive (modules, the registry, the store) is frozen: many objects.
    assert seen and seen[0] > 10_000
