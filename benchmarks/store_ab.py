"""CPU per governed call, two source trees A/B, interleaved in one run.

Each measurement is a fresh subprocess whose ``PYTHONPATH`` is one tree's ``src`` (and the tree
itself, for ``tests.helpers``): ``before`` is a git worktree of ``--before`` (made under /tmp
and removed afterwards), ``after`` is this checkout. Rounds alternate the order (before/after,
then after/before) and both stores (SQLite file, PostgreSQL), so drift on the machine hits both
trees alike. A subprocess governs ``--warm`` calls, then ``--calls`` measured ones:
``Runtime.propose`` of a write action with no approval (JSON Schema input, CEL, idempotency key,
run + reservation + audit, then result + completion + audit: two units), one caller. CPU is the
whole process's (``time.process_time()``: event loop and SQLite's writer thread alike), per call.

    .venv/bin/python benchmarks/store_ab.py --before main [--rounds 6] [--calls 1500]

PostgreSQL comes from ``SIGNOFF_BENCH_POSTGRES_URL`` (falling back to
``SIGNOFF_TEST_POSTGRES_URL``); without either, SQLite alone. Prints a table (medians over the
rounds, and the after/before ratio of the medians).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent


async def _worker(backend: str, url: str, warm: int, calls: int) -> dict[str, float]:
    # Imported here: from whichever tree PYTHONPATH names (never this file's own tree).
    from tests.helpers import NO_APPROVAL, SMALL, Recorder, definition, proposal

    from signoff.core.registry import ActionRegistry
    from signoff.core.runtime import Runtime
    from signoff.store.sql import open_sql_store

    store = await open_sql_store(url, upgrade=True)
    try:
        runtime = Runtime(ActionRegistry([definition(Recorder(), approval=NO_APPROVAL)]), store)
        tenant = f"ab-{uuid.uuid4().hex[:10]}"
        for n in range(warm + calls):
            if n == warm:
                cpu, wall = time.process_time(), time.perf_counter()
            done = await runtime.propose(proposal(SMALL, tenant=tenant, key=f"k-{n}"))
            assert done.code == "SUCCEEDED", done.code
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await store.close()
    return {"cpu_ms": cpu * 1000 / calls, "wall_ms": wall * 1000 / calls}


def _measure(tree: Path, backend: str, url: str, warm: int, calls: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}{os.pathsep}{tree}")
    args = [sys.executable, str(HERE), "--worker", backend, "--url", url]
    args += ["--warm", str(warm), "--calls", str(calls)]
    out = subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{tree} {backend}: {out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _worktree(ref: str) -> tuple[Path, str]:
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", ref],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"signoff-ab-{sha}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(path), sha],
            check=True,
        )
    return path, sha


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", default="main", help="git ref of the before tree")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--warm", type=int, default=300)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(asyncio.run(_worker(args.worker, args.url, args.warm, args.calls))))
        return
    before, sha = _worktree(args.before)
    after_sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "src"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pg = os.environ.get("SIGNOFF_BENCH_POSTGRES_URL") or os.environ.get("SIGNOFF_TEST_POSTGRES_URL")
    trees = {"before": before, "after": ROOT}
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            for round_ in range(args.rounds):
                order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
                backends = [("sqlite", "")] + ([("postgres", pg)] if pg else [])
                for backend, url in backends:
                    for name in order:
                        if backend == "sqlite":
                            url = f"sqlite+aiosqlite:///{scratch}/{name}-{round_}.db"
                        got = _measure(trees[name], backend, url, args.warm, args.calls)
                        samples.setdefault((backend, name), []).append(got)
                        print(
                            f"round {round_ + 1} {backend:8} {name:6} "
                            f"cpu {got['cpu_ms']:.3f} ms/call  wall {got['wall_ms']:.3f}",
                            file=sys.stderr,
                        )
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False
        )
    print(
        f"\nCPU per governed call (ms, whole process), medians of {args.rounds} interleaved "
        f"rounds of {args.calls} calls after {args.warm} warm-up; before = {sha}, "
        f"after = {after_sha}{' + uncommitted changes' if dirty else ''}.\n"
    )
    print("| store | before CPU | after CPU | after / before | before wall | after wall |")
    print("|---|---:|---:|---:|---:|---:|")
    for backend in dict.fromkeys(b for b, _ in samples):
        b = samples[(backend, "before")]
        a = samples[(backend, "after")]
        bc = statistics.median(s["cpu_ms"] for s in b)
        ac = statistics.median(s["cpu_ms"] for s in a)
        bw = statistics.median(s["wall_ms"] for s in b)
        aw = statistics.median(s["wall_ms"] for s in a)
        print(f"| {backend} | {bc:.3f} | {ac:.3f} | {ac / bc:.3f} | {bw:.3f} | {aw:.3f} |")


if __name__ == "__main__":
    main()
