"""What a governed call's contract-mandated work costs at least, piece by piece, in this runtime.

The memory-store pipeline target (10,000 governed calls/s) leaves 100 µs per call. This script
times, on the benchmark action of ``store_throughput.py`` and with signoff's own compiled
objects, the pieces every governed synchronous call must do whatever the code around them
looks like — each alone, in a tight loop, with nothing else running:

- input validation: the action's compiled JSON Schema (``jsonschema-rs``);
- policy: the action's compiled CEL expressions (resource, deny rule, approval rule), each
  evaluated once with only the variables it names;
- the audit chain: ``core/chain.link`` of the six events a governed call records (RFC 8785
  bytes, SHA-256, one event object each), captured from a real run;
- the run: one ``ActionRun`` validated, four transitions (``ActionRun.advance``), its JSON for
  the store;
- the result: ``ExecutionResult.succeeded`` of the executor's output and the caller's
  ``ActionOutcome``;
- isolation from the caller: the task and shield that let a call finish when its client leaves.

Then it runs the whole governed call on the memory store, interleaved, and prints both: the sum
of the pieces is a floor no restructuring of the code around them can go below in CPython.

    .venv/bin/python benchmarks/pipeline_floor.py [--repeat 5] [--number 2000]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from store_throughput import Caller, noop, runtime_on  # noqa: E402
from tests.helpers import NO_APPROVAL, definition  # noqa: E402

from signoff.core.answers import outcome_of  # noqa: E402
from signoff.core.chain import GENESIS, link  # noqa: E402
from signoff.core.ports import ChainHead  # noqa: E402
from signoff.core.registry import ActionRegistry, validate_input  # noqa: E402
from signoff.core.results import ExecutionResult  # noqa: E402
from signoff.core.run import ActionRun, RunStatus  # noqa: E402
from signoff.core.runtime import Runtime  # noqa: E402
from signoff.store.memory import InMemoryStore  # noqa: E402


def per_call_us(work: Callable[[], Any], number: int, repeat: int) -> float:
    """Best of ``repeat`` loops of ``number`` calls, in µs per call, the collector off."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                work()
            best = min(best, (time.perf_counter() - start) / number)
    finally:
        gc.enable()
    return best * 1e6


async def captured() -> tuple[Any, ActionRun, list[Any]]:
    """One real governed call's action, stored run and audit events."""
    store = InMemoryStore()
    registry = ActionRegistry([definition(noop, approval=NO_APPROVAL)])
    caller = Caller(Runtime(registry, store))
    await caller.call()
    (run,) = await store.runs.list(tenant_id="bench", limit=1)
    events = await store.audit.list_for_run(run.run_id)
    return registry.resolve(run.action_id), run, events


async def whole_call_us(number: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        caller = Caller(runtime_on(InMemoryStore()))
        await caller.calls(50)
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            await caller.calls(number)
            best = min(best, (time.perf_counter() - start) / number)
        finally:
            gc.enable()
    return best * 1e6


def shielded_us(number: int, repeat: int) -> float:
    async def nothing() -> None:
        return None

    async def loop() -> float:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                await asyncio.shield(asyncio.ensure_future(nothing()))
            best = min(best, (time.perf_counter() - start) / number)
        return best * 1e6

    return asyncio.run(loop())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()
    n, r = args.number, args.repeat
    action, run, events = asyncio.run(captured())
    data = dict(run.input)
    policy_input = {"input": data, "principal": {"id": "agent-1", "roles": ["billing"]}}
    expressions = [action.resource, *(e for _, e in action.deny), action.approval_when]
    expressions = [e for e in expressions if e is not None]
    head = ChainHead("bench", 0, GENESIS)
    dumped = run.model_dump(mode="json")
    assert run.result is not None
    output = dict(run.result.output or {})
    now = run.updated_at
    fresh = ActionRun.model_validate(
        {**dumped, "status": "REQUESTED", "result": None, "version": 0, "attempt": 0}
    )

    def transitions() -> None:
        a = fresh.advance(RunStatus.VALIDATING, now)
        b = a.advance(RunStatus.POLICY_EVALUATED, now)
        c = b.advance(RunStatus.RUNNING, now)
        c.advance(RunStatus.SUCCEEDED, now)

    pieces: list[tuple[str, Callable[[], Any]]] = [
        ("input validation (JSON Schema, compiled)", lambda: validate_input(action, data)),
        (
            f"policy ({len(expressions)} CEL expressions)",
            lambda: [e.evaluate(policy_input) for e in expressions],
        ),
        (f"audit chain ({len(events)} events linked)", lambda: link(head, events)),
        ("run validated once", lambda: ActionRun.model_validate(dumped)),
        ("run: four transitions", transitions),
        ("run JSON for the store, twice", lambda: (run.model_dump_json(), run.model_dump_json())),
        (
            "result and the caller's outcome",
            lambda: (ExecutionResult.succeeded(output), outcome_of(run)),
        ),
    ]
    rows: list[tuple[str, float]] = [(name, per_call_us(work, n, r)) for name, work in pieces]
    rows.append(("task + shield (finish when the caller leaves)", shielded_us(n, r)))
    floor = sum(us for _, us in rows)
    whole = statistics.median([asyncio.run(whole_call_us(max(n // 2, 100), r)) for _ in range(3)])
    print(f"\nA governed call's pieces, each alone (best of {r} loops of {n}, collector off):\n")
    print("| piece | µs per call |")
    print("|---|---:|")
    for name, us in rows:
        print(f"| {name} | {us:.1f} |")
    print(
        f"| **sum of the pieces (floor)** | **{floor:.1f}** ({1e6 / floor:,.0f} calls/s at most) |"
    )
    print(f"| whole governed call, memory store | {whole:.1f} ({1e6 / whole:,.0f} calls/s) |")
    print(
        f"\nthe pieces are {floor / whole:.0%} of the whole call; the target (10,000 calls/s) "
        f"leaves 100 µs"
    )
    print(
        f"\nPython {platform.python_version()}, {os.cpu_count()} CPUs "
        "(shared with other sessions: read the ratios)."
    )


if __name__ == "__main__":
    main()
