"""Reload manifests while serving: on SIGHUP or when the manifest files change.

A broken edit never replaces a working set: the registry keeps the last good actions and every
problem is logged. Changes are found by polling a content fingerprint (no extra dependency, works
on every filesystem and with editors that replace files instead of writing them).

Python modules the hooks live in are not re-imported: a changed executor needs a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import logging
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from signoff.core.registry import ActionRegistry, CompiledAction
from signoff.manifest.errors import ManifestErrors, ManifestProblem
from signoff.manifest.loader import load_manifests, manifest_files

logger = logging.getLogger("signoff.manifest")

OnReload = Callable[[Sequence[CompiledAction]], Awaitable[None] | None]


def fingerprint(source: Path) -> str:
    """A digest of every manifest's name and content (changes when any file is edited)."""
    digest = hashlib.sha256()
    if not source.exists():
        return "missing"
    for path in manifest_files(source):
        digest.update(str(path).encode())
        digest.update(b"\0")
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


class ManifestReloader:
    """Keeps ``registry`` in step with ``source``; ``on_reload`` runs after each successful swap."""

    def __init__(
        self,
        source: Path | str,
        registry: ActionRegistry,
        *,
        on_reload: OnReload | None = None,
        interval: float = 1.0,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.source = Path(source)
        self.registry = registry
        self.on_reload = on_reload
        self.interval = interval
        self.environ = environ
        self.last_errors: ManifestErrors | None = None
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._fingerprint = fingerprint(self.source)
        self._signal_installed = False
        self._forced = False

    async def reload(self) -> bool:
        """Load the manifests now; swap them in if valid. ``False`` keeps the last good set."""
        async with self._lock:
            self._fingerprint = await asyncio.to_thread(fingerprint, self.source)
            try:
                loaded = await asyncio.to_thread(load_manifests, self.source, environ=self.environ)
            except ManifestErrors as exc:
                self.last_errors = exc
                kept = len(self.registry.all())
                logger.error(
                    "manifest reload failed, keeping the last good set of %d actions",
                    kept,
                    extra={"actions": kept, "problems": len(exc.problems)},
                )
                for problem in exc.problems:
                    logger.error("manifest problem: %s", problem.message, extra=_facts(problem))
                return False
            for warning in loaded.warnings:
                logger.warning("manifest warning: %s", warning.message, extra=_facts(warning))
            actions = loaded.compiled
            before = {a.id: a.revision for a in self.registry.all()}
            self.registry.replace(actions)
            self.last_errors = None
            after = {a.id: a.revision for a in actions}
            added = sorted(after.keys() - before.keys())
            removed = sorted(before.keys() - after.keys())
            changed = sorted(i for i in after.keys() & before.keys() if after[i] != before[i])
            logger.info(
                "reloaded %d actions from %s: %d added, %d removed, %d changed",
                len(actions),
                self.source,
                len(added),
                len(removed),
                len(changed),
                extra={
                    "actions": len(actions),
                    "added": added,
                    "removed": removed,
                    "changed": changed,
                },
            )
        if self.on_reload is not None:
            try:
                result = self.on_reload(actions)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception("on_reload callback failed")
        return True

    def request_reload(self) -> None:
        """Reload at the next opportunity even if no file changed (what SIGHUP does)."""
        self._forced = True
        self._wake.set()

    async def _changed(self) -> bool:
        return await asyncio.to_thread(fingerprint, self.source) != self._fingerprint

    async def run(self) -> None:
        """Watch until cancelled: reload on request or when the fingerprint changes."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval)
            self._wake.clear()
            forced, self._forced = self._forced, False
            if forced or await self._changed():
                await self.reload()

    def install_signal_handler(self) -> bool:
        """Reload on SIGHUP (where the platform has it); call from the event loop's thread."""
        if not hasattr(signal, "SIGHUP"):  # pragma: no cover - Windows
            return False
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.request_reload)
        self._signal_installed = True
        return True

    def start(self, *, signals: bool = True) -> asyncio.Task[None]:
        if signals:
            self.install_signal_handler()
        self._task = asyncio.get_running_loop().create_task(self.run())
        return self._task

    async def stop(self) -> None:
        if self._signal_installed:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            self._signal_installed = False
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def __aenter__(self) -> ManifestReloader:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


def _facts(problem: ManifestProblem) -> dict[str, object]:
    """A manifest problem's facts as log fields (file, line, column, path, code, severity)."""
    return {
        "file": problem.file,
        "line": problem.line,
        "column": problem.column,
        "field": problem.path,
        "code": str(problem.code),
        "severity": str(problem.severity),
    }
