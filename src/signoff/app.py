"""The composition root: settings in, a wired runtime out. ``serve``, the CLI and tests share it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from signoff.core.clock import SystemClock
from signoff.core.compiled import ActionRegistry
from signoff.core.ports import Clock, Store
from signoff.core.runtime import Runtime
from signoff.store.factory import DEFAULT_DATABASE_URL, open_store


@dataclass(frozen=True)
class Settings:
    database_url: str = DEFAULT_DATABASE_URL
    manifests_dir: Path = Path("manifests")
    # ``None`` keeps the store's default (embedded SQLite upgrades itself; servers do not).
    upgrade_database: bool | None = None
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
) -> Application:
    registry = registry if registry is not None else load_registry(settings.manifests_dir)
    store = (
        store
        if store is not None
        else await open_store(settings.database_url, upgrade=settings.upgrade_database)
    )
    runtime = Runtime(registry, store, clock=clock or SystemClock())
    return Application(settings=settings, registry=registry, store=store, runtime=runtime)
