"""The composition root: settings in, a wired runtime out. ``serve``, the CLI and tests share it."""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from signoff.core.clock import SystemClock
from signoff.core.compiled import ActionRegistry
from signoff.core.ports import Clock, Notifier, Store
from signoff.core.runtime import Runtime
from signoff.store.factory import DEFAULT_DATABASE_URL, open_store


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    manifests_dir: Path = Path("manifests")
    # ``None`` keeps the store's default (embedded SQLite upgrades itself; servers do not).
    upgrade_database: bool | None = None
    # Stable per deployment slot (SIGNOFF_INSTANCE_ID) lets a restarted process recover its own
    # earlier life at once; the default is unique per process, and a dead process's runs are
    # recovered once its heartbeat goes stale.
    instance_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class Application:
    settings: Settings
    registry: ActionRegistry
    store: Store
    runtime: Runtime

    async def close(self) -> None:
        await self.runtime.drain()
        await self.store.close()


log = logging.getLogger("signoff")


def default_instance_id() -> str:
    return os.environ.get("SIGNOFF_INSTANCE_ID") or f"{socket.gethostname()}-{os.getpid()}"


async def start_application(settings: Settings) -> Application:
    """Build the application and reconcile what a crash may have left (every server start)."""
    application = await build_application(settings)
    try:
        report = await application.runtime.recover()
    except BaseException:
        await application.close()
        raise
    if report.redispatched or report.interrupted or report.expired or report.orphaned:
        log.warning(
            "recovery: %d re-dispatched, %d interrupted, %d expired, %d orphaned",
            len(report.redispatched),
            len(report.interrupted),
            report.expired,
            report.orphaned,
        )
    return application


def load_registry(manifests_dir: Path) -> ActionRegistry:
    """Load and compile every manifest; raises ``ManifestErrors`` listing all problems."""
    from signoff.manifest import load_manifest_dir

    return ActionRegistry(load_manifest_dir(manifests_dir))


async def build_application(
    settings: Settings,
    *,
    registry: ActionRegistry | None = None,
    store: Store | None = None,
    clock: Clock | None = None,
    notifier: Notifier | None = None,
) -> Application:
    registry = registry if registry is not None else load_registry(settings.manifests_dir)
    store = (
        store
        if store is not None
        else await open_store(settings.database_url, upgrade=settings.upgrade_database)
    )
    runtime = Runtime(
        registry,
        store,
        clock=clock or SystemClock(),
        instance_id=settings.instance_id or default_instance_id(),
        notifier=notifier,
    )
    return Application(settings=settings, registry=registry, store=store, runtime=runtime)
