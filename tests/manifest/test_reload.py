"""Reloading while serving: a good edit is swapped in, a broken one keeps the last good set."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest

from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.manifest import ManifestReloader, ProblemCode, load_manifest_dir
from tests.manifest.support import VALID, edited, write

DEADLINE = 30.0  # a hang guard, never a timing claim
SECOND = edited("id: demo.act", "id: demo.second")


class Reloads:
    """Records each successful reload; ``next`` waits for one under a deadline."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._event = asyncio.Event()

    async def __call__(self, actions: Sequence[CompiledAction]) -> None:
        self.calls.append([action.id for action in actions])
        self._event.set()

    async def next(self) -> list[str]:
        await asyncio.wait_for(self._event.wait(), DEADLINE)
        self._event.clear()
        return self.calls[-1]


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    directory = tmp_path / "manifests"
    write(directory, "a.yaml", VALID)
    return directory


def registry_for(directory: Path) -> ActionRegistry:
    return ActionRegistry(load_manifest_dir(directory, environ={}))


async def test_a_valid_edit_is_swapped_in_and_announced(manifests: Path) -> None:
    registry = registry_for(manifests)
    reloads = Reloads()
    reloader = ManifestReloader(manifests, registry, on_reload=reloads, environ={})
    write(manifests, "b.yaml", SECOND)

    assert await reloader.reload() is True

    assert [action.id for action in registry.all()] == ["demo.act", "demo.second"]
    assert reloads.calls == [["demo.act", "demo.second"]]


async def test_a_broken_edit_keeps_the_last_good_set_and_logs_every_problem(
    manifests: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = registry_for(manifests)
    before = registry.resolve("demo.act")
    reloads = Reloads()
    reloader = ManifestReloader(manifests, registry, on_reload=reloads, environ={})
    write(manifests, "a.yaml", edited("effect: write", "effect: wrte"))
    write(manifests, "b.yaml", edited("count: 2", "count: many", SECOND))

    with caplog.at_level(logging.ERROR, logger="signoff.manifest"):
        assert await reloader.reload() is False

    assert registry.resolve("demo.act") is before
    assert registry.resolve("demo.second") is None
    assert reloads.calls == []
    assert reloader.last_errors is not None
    assert [p.code for p in reloader.last_errors.problems] == [
        ProblemCode.INVALID_VALUE,
        ProblemCode.WRONG_TYPE,
    ]
    logged = {
        (r.__dict__.get("file"), r.__dict__.get("line"), r.__dict__.get("code"), r.getMessage())
        for r in caplog.records
    }
    assert all(
        (p.file, p.line, str(p.code), f"manifest problem: {p.message}") in logged
        for p in reloader.last_errors.problems
    )


async def test_the_watcher_notices_a_changed_file(manifests: Path) -> None:
    registry = registry_for(manifests)
    reloads = Reloads()
    reloader = ManifestReloader(manifests, registry, on_reload=reloads, interval=0.02, environ={})
    reloader.start(signals=False)
    try:
        write(manifests, "b.yaml", SECOND)
        assert await reloads.next() == ["demo.act", "demo.second"]

        # Whether or not the watcher sees the broken moment, the fixed file is what lands.
        write(manifests, "b.yaml", "apiVersion: [")
        write(manifests, "b.yaml", edited("title: Demo", "title: Fixed", SECOND))
        assert await reloads.next() == ["demo.act", "demo.second"]
    finally:
        await reloader.stop()

    second = registry.resolve("demo.second")
    assert second is not None and second.definition.title == "Fixed"


async def test_sighup_reloads_even_without_a_file_change(manifests: Path) -> None:
    registry = registry_for(manifests)
    generation = registry.generation
    reloads = Reloads()
    # A long poll interval: only the signal can cause this reload within the deadline.
    reloader = ManifestReloader(manifests, registry, on_reload=reloads, interval=3600, environ={})
    reloader.start(signals=True)
    try:
        os.kill(os.getpid(), signal.SIGHUP)
        assert await reloads.next() == ["demo.act"]
    finally:
        await reloader.stop()

    assert registry.generation == generation + 1


async def test_a_failing_callback_does_not_undo_the_reload(
    manifests: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = registry_for(manifests)

    def broken(actions: Sequence[CompiledAction]) -> None:
        raise RuntimeError("notification failed")

    reloader = ManifestReloader(manifests, registry, on_reload=broken, environ={})
    write(manifests, "b.yaml", SECOND)

    with caplog.at_level(logging.ERROR, logger="signoff.manifest"):
        assert await reloader.reload() is True

    assert registry.resolve("demo.second") is not None
    assert any(record.exc_info for record in caplog.records)


async def test_a_reload_logs_which_actions_were_added_removed_and_changed(
    manifests: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = registry_for(manifests)
    reloader = ManifestReloader(manifests, registry, environ={})
    write(manifests, "a.yaml", edited("id: demo.act", "id: demo.renamed"))
    write(manifests, "b.yaml", SECOND)
    with caplog.at_level(logging.INFO, logger="signoff.manifest"):
        assert await reloader.reload() is True
    (record,) = [r for r in caplog.records if r.getMessage().startswith("reloaded")]
    assert record.__dict__["added"] == ["demo.renamed", "demo.second"]
    assert record.__dict__["removed"] == ["demo.act"]
    assert record.__dict__["changed"] == []
    assert "2 added, 1 removed, 0 changed" in record.getMessage()


async def test_a_failed_reload_logs_each_problems_facts_as_fields_not_in_the_message(
    manifests: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from signoff.observability.logs import json_formatter

    registry = registry_for(manifests)
    reloader = ManifestReloader(manifests, registry, environ={})
    write(manifests, "a.yaml", edited("effect: write", "effect: sideways"))
    with caplog.at_level(logging.WARNING, logger="signoff"):
        assert await reloader.reload() is False
    problems = [r for r in caplog.records if r.getMessage().startswith("manifest problem")]
    assert problems, [r.getMessage() for r in caplog.records]
    first = problems[0]
    assert first.__dict__["file"].endswith("a.yaml") and first.__dict__["line"] is not None
    assert first.__dict__["code"] == str(ProblemCode.INVALID_VALUE)
    assert "a.yaml" not in first.getMessage() and "[INVALID_VALUE]" not in first.getMessage()
    fields = json.loads(json_formatter().format(first))
    assert fields["code"] == "INVALID_VALUE" and fields["file"].endswith("a.yaml")
