"""CPU time of the command line's start: ``signoff --help``, ``--version`` and subcommands' help.

Each command runs ``--runs`` times as its own process (the installed ``signoff`` script beside
this interpreter); the CPU time is the child's user + system time from ``os.wait4``, so a busy
machine inflates wall time but hardly the CPU figure. Prints min / median / max CPU and the
median wall time, in milliseconds.

    .venv/bin/python benchmarks/cli_start_up.py [--runs 20] [--signoff PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (
    ("--help",),
    ("--version",),
    ("approvals", "approve", "--help"),
    ("runs", "list", "--help"),
    ("serve", "--help"),
)


def measure(command: list[str]) -> tuple[float, float, int]:
    """One run: (CPU seconds, wall seconds, exit status)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--signoff", default=str(Path(sys.executable).parent / "signoff"))
    args = parser.parse_args()
    print(f"{args.runs} runs each of {args.signoff}; CPU is user + system of the child, in ms")
    print()
    print("| command | CPU min | CPU median | CPU max | wall median |")
    print("|---|---:|---:|---:|---:|")
    for words in COMMANDS:
        measure([args.signoff, *words])  # warm the file cache and the bytecode
        runs = [measure([args.signoff, *words]) for _ in range(args.runs)]
        cpu, wall = [r[0] for r in runs], [r[1] for r in runs]
        failed = {r[2] for r in runs} - {0}
        note = f" (exit {', '.join(map(str, sorted(failed)))})" if failed else ""
        print(
            f"| `signoff {' '.join(words)}`{note} | {min(cpu) * 1e3:.0f} | "
            f"{statistics.median(cpu) * 1e3:.0f} | {max(cpu) * 1e3:.0f} | "
            f"{statistics.median(wall) * 1e3:.0f} |"
        )


if __name__ == "__main__":
    main()
