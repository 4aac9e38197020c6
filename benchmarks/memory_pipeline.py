"""The governed pipeline on the memory store, measured so the garbage collector is visible.

The shipped memory store keeps every run, duplicate entry and audit event forever, so a long
benchmark spends more and more of its time in full (generation 2) collections walking them.
Interleaved in the same run, one caller each:

- growing: one ``InMemoryStore`` for the round's calls (what ``store_throughput.py`` measures);
- bounded: a fresh ``InMemoryStore`` every ``--window`` calls, so at most that many runs live;
- bounded, GC off: the same with the collector disabled while timing (pipeline CPU alone).

Full collections and the time spent in them are counted with ``gc.callbacks``.

    .venv/bin/python benchmarks/memory_pipeline.py [--calls 20000] [--rounds 3] [--window 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from store_throughput import Caller, runtime_on

from signoff.store.memory import InMemoryStore


class FullCollections:
    """Counts generation-2 collections and their duration."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start


@contextmanager
def watched() -> Iterator[FullCollections]:
    seen = FullCollections()
    gc.callbacks.append(seen)
    try:
        yield seen
    finally:
        gc.callbacks.remove(seen)


async def growing(calls: int) -> tuple[float, FullCollections]:
    """A store that keeps every run of the round; dropped (and collected) afterwards."""
    caller = Caller(runtime_on(InMemoryStore()))
    await caller.calls(20)
    with watched() as seen:
        rate = await caller.calls(calls)
    del caller
    gc.collect()
    return rate, seen


async def bounded(calls: int, window: int, gc_off: bool) -> tuple[float, FullCollections]:
    elapsed = 0.0
    with watched() as seen:
        for _ in range(max(calls // window, 1)):
            caller = Caller(runtime_on(InMemoryStore()))
            await caller.calls(20)  # the store's first calls, outside the timing
            if gc_off:
                gc.disable()
            try:
                start = time.perf_counter()
                await caller.calls(window)
                elapsed += time.perf_counter() - start
            finally:
                gc.enable()
    return max(calls // window, 1) * window / elapsed, seen


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=1000)
    args = parser.parse_args()
    await Caller(runtime_on(InMemoryStore())).calls(200)  # imports, compiled expressions
    gc.collect()
    results: dict[str, list[tuple[float, FullCollections]]] = {}
    for _ in range(args.rounds):
        results.setdefault("growing store (shipped benchmark)", []).append(
            await growing(args.calls)
        )
        results.setdefault(f"bounded store (<= {args.window:,} runs)", []).append(
            await bounded(args.calls, args.window, gc_off=False)
        )
        results.setdefault("bounded store, GC off", []).append(
            await bounded(args.calls, args.window, gc_off=True)
        )
        print({k: round(v[-1][0]) for k, v in results.items()}, flush=True)
    print(
        f"\nMemory store, one caller, medians of {args.rounds} interleaved rounds of "
        f"{args.calls:,} calls.\n"
    )
    print("| mode | calls/s | µs/call | full collections per round | seconds in them |")
    print("|---|---:|---:|---:|---:|")
    for label, rows in results.items():
        rate = statistics.median(r for r, _ in rows)
        count = statistics.median(s.count for _, s in rows)
        seconds = statistics.median(s.seconds for _, s in rows)
        print(f"| {label} | {rate:,.0f} | {1e6 / rate:,.0f} | {count:g} | {seconds:.2f} |")
    print(
        f"\nPython {platform.python_version()}, {os.cpu_count()} CPUs "
        "(shared with other sessions: read the ratios)."
    )


if __name__ == "__main__":
    asyncio.run(main())
