"""The tutorial (docs/tutorial.md) as a test: every ``sh`` block runs as written, in order, in an
empty directory, and what it prints must match the ``text`` block after it (``…`` stands for
anything; the lines shown must appear in that order). A block starting ``# terminal 1`` runs in
the background, like a second terminal, and a ``text`` block that follows prose instead of a
command is more of that terminal's output. ``RUN_ID`` is the run id that terminal printed. A
block starting ``# install`` is not run: the installed signoff is this checkout's (the built
wheel is installed the same way by tests/packaging)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUN_ID = re.compile(r"\brun ([0-9a-f]{8}-[0-9a-f-]{27})\b")
DEADLINE = 120.0
pytestmark = pytest.mark.slow


@dataclass
class Step:
    kind: str  # "run", "background", "expect" (output of the step before), "later" (background)
    text: str


def steps(page: str) -> list[Step]:
    found: list[Step] = []
    last_end = 0
    for match in BLOCK.finditer(page):
        language, body = match.group(1), match.group(2)
        between = page[last_end : match.start()].strip()
        last_end = match.end()
        if language == "sh":
            if body.startswith("# install"):
                found.append(Step("skip", body))
            elif body.startswith("# terminal 1"):
                found.append(Step("background", body))
            else:
                found.append(Step("run", body))
        elif language == "text":
            follows_command = not between and found and found[-1].kind in ("run", "background")
            found.append(Step("expect" if follows_command else "later", body))
    return found


def patterns(expected: str) -> list[re.Pattern[str]]:
    return [
        re.compile(".*".join(re.escape(part) for part in line.split("…")))
        for line in expected.strip("\n").splitlines()
        if line.strip() != "…"
    ]


def unmatched(expected: str, output: str) -> list[str]:
    """The expected lines that do not appear, in order, in ``output`` (empty: it matches)."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = 0
    for pattern in patterns(expected):
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return [pattern.pattern]
        at += 1
    return []


@dataclass
class Background:
    """A command running as in a second terminal; its output lines, as they come."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ended: bool = False
    changed: threading.Condition = field(default_factory=threading.Condition)

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def wait_for(self, expected: str) -> None:
        """Until its output shows ``expected`` (or it ends, or the deadline passes)."""
        deadline = time.monotonic() + DEADLINE
        with self.changed:
            while unmatched(expected, "".join(self.lines)) and not self.ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.changed.wait(left)
            output = "".join(self.lines)
        assert unmatched(expected, output) == [], output


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "OTEL_"))},
        "HOME": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "AGENT_WAIT": str(DEADLINE),
    }
    cwd = tmp_path
    background: Background | None = None
    last_output = ""
    previous = ""
    ran = 0
    try:
        for step in steps(PAGE.read_text()):
            if step.kind == "run":
                script = step.text
                if "RUN_ID" in script:
                    assert background is not None
                    run_id = RUN_ID.findall("".join(background.lines))[0]
                    script = script.replace("RUN_ID", run_id)
                done = run(script, cwd, env)
                assert done.returncode == 0, done.stdout + done.stderr
                cwd = done.cwd
                last_output = done.stdout + done.stderr
                ran += 1
            elif step.kind == "background":
                assert background is None, "the tutorial uses one background terminal"
                process = subprocess.Popen(
                    ["bash", "-euo", "pipefail", "-c", step.text],
                    cwd=cwd,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                background = Background(process)
                threading.Thread(target=background.read, daemon=True).start()
                ran += 1
            elif step.kind == "expect" and previous == "run":
                assert unmatched(step.text, last_output) == [], last_output
            elif step.kind in ("expect", "later"):
                assert background is not None
                background.wait_for(step.text)
            previous = step.kind
    finally:
        if background is not None:
            background.process.terminate()
            background.process.wait(30)
            if background.process.stdout is not None:
                background.process.stdout.close()
    assert ran >= 5


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str
    cwd: Path


def run(script: str, cwd: Path, env: dict[str, str]) -> Done:
    """Run ``script`` in bash in ``cwd``; ``Done.cwd`` is where it ended (a ``cd`` carries on)."""
    read, write = os.pipe()
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", f"{script}\npwd >&{write}"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
            pass_fds=(write,),
        )
    finally:
        os.close(write)
    with os.fdopen(read) as pipe:
        where = pipe.read().strip()
    return Done(done.returncode, done.stdout, done.stderr, Path(where) if where else cwd)
