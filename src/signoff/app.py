"""The composition root: settings in, a wired runtime out. ``serve``, the CLI and tests share it."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

from signoff.core.clock import SystemClock
from signoff.core.dispatch import DEFAULT_TENANT_SHARE, AsyncLane
from signoff.core.input_limits import InputLimits
from signoff.core.observe import RuntimeObserver
from signoff.core.ports import Clock, Notifier, Store
from signoff.core.recovery import RecoveryReport
from signoff.core.registry import ActionRegistry
from signoff.core.run import ActionRun
from signoff.core.runtime import DEFAULT_PENDING_PER_PRINCIPAL, Runtime
from signoff.maintenance import DEFAULT_EVERY, Maintenance, maintenance
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
    # Contract §9: SIGNOFF_MAX_INPUT_BYTES (default 256 KiB), SIGNOFF_MAX_INPUT_DEPTH (32).
    input_limits: InputLimits = field(default_factory=lambda: InputLimits.from_env(os.environ))
    # What the runtime reports governed calls to (logs, metrics, traces); ``None``: nothing.
    observer: RuntimeObserver | None = None
    # The part of the background lane one tenant may hold (SIGNOFF_LANE_TENANT_SHARE, 0 < x <= 1).
    lane_tenant_share: float = field(default_factory=lambda: _lane_share(os.environ))
    # How many of one principal's requests may wait for approval (SIGNOFF_PENDING_APPROVALS_PER_PRINCIPAL).
    pending_per_principal: int = field(default_factory=lambda: _pending_cap(os.environ))


def _pending_cap(env: Mapping[str, str]) -> int:
    text = env.get("SIGNOFF_PENDING_APPROVALS_PER_PRINCIPAL") or str(DEFAULT_PENDING_PER_PRINCIPAL)
    if not text.isdigit() or int(text) < 1:
        raise ValueError(
            f"SIGNOFF_PENDING_APPROVALS_PER_PRINCIPAL must be a whole number >= 1, got {text!r}"
        )
    return int(text)


def _lane_share(env: Mapping[str, str]) -> float:
    text = env.get("SIGNOFF_LANE_TENANT_SHARE") or str(DEFAULT_TENANT_SHARE)
    try:
        share = float(text)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise ValueError(f"SIGNOFF_LANE_TENANT_SHARE must be a number in (0, 1], got {text!r}")
    return share


@dataclass
class Application:
    settings: Settings
    registry: ActionRegistry
    store: Store
    runtime: Runtime
    housekeeping: Maintenance | None = None
    _running: AsyncExitStack = field(default_factory=AsyncExitStack, repr=False)

    async def start_housekeeping(self, every: float = DEFAULT_EVERY) -> Maintenance:
        """Run the housekeeping loop (``maintenance.py``) until ``close``; once per application."""
        if self.housekeeping is None:
            self.housekeeping = await self._running.enter_async_context(
                maintenance(self.runtime, self.store, every=every)
            )
        return self.housekeeping

    async def close(self) -> None:
        await self._running.aclose()
        await self.runtime.drain()
        await self.store.close()


log = logging.getLogger("signoff")


def default_instance_id() -> str:
    return os.environ.get("SIGNOFF_INSTANCE_ID") or f"{socket.gethostname()}-{os.getpid()}"


async def start_application(
    settings: Settings,
    *,
    housekeeping_every: float | None = DEFAULT_EVERY,
    registry: ActionRegistry | None = None,
    store: Store | None = None,
    clock: Clock | None = None,
    notifier: NotifierFactory | None = None,
) -> Application:
    """Build the application, reconcile what a crash may have left, and start housekeeping
    every ``housekeeping_every`` seconds (``None``: never) — every server, whatever its
    transport, starts here."""
    application = await build_application(
        settings, registry=registry, store=store, clock=clock, notifier=notifier
    )
    try:
        report = await application.runtime.recover()
        if housekeeping_every is not None:
            await application.start_housekeeping(housekeeping_every)
    except BaseException:
        await application.close()
        raise
    log_recovery(report)
    return application


def log_recovery(report: RecoveryReport) -> None:
    """One line saying what start-up recovery did (a warning when it had to act)."""
    acted = report.redispatched or report.interrupted or report.expired or report.orphaned
    (log.warning if acted else log.info)(
        "recovery: %d re-dispatched, %d interrupted, %d expired, %d orphaned",
        len(report.redispatched),
        len(report.interrupted),
        report.expired,
        report.orphaned,
        extra={
            # Run ids, so the operator can look each one up (bounded: a log line, not a report).
            "redispatched": report.redispatched[:50],
            "interrupted": report.interrupted[:50],
            "expired": report.expired,
            "orphaned": report.orphaned,
            "skipped": report.skipped,
        },
    )


def load_registry(manifests_dir: Path) -> ActionRegistry:
    """Load and compile every manifest; raises ``ManifestErrors`` listing all problems. Warnings
    (``signoff check`` prints them too) are logged, one line each."""
    from signoff.manifest import load_manifests

    loaded = load_manifests(manifests_dir)
    for warning in loaded.warnings:
        log.warning("manifest %s", warning)
    return ActionRegistry(loaded.compiled)


NotifierFactory = Callable[[Runtime], Notifier | None]
"""Builds the approval notifier from the runtime whose reads it renders (webhook, Slack)."""


class _Connected:
    """The runtime's notifier, built from that same runtime: connected once, here, at assembly
    (no surface ever replaces it)."""

    def __init__(self) -> None:
        self.target: Notifier | None = None

    async def approval_requested(self, run: ActionRun) -> None:
        if self.target is not None:
            await self.target.approval_requested(run)

    async def approval_decided(self, run: ActionRun, decision: str) -> None:
        if self.target is not None:
            await self.target.approval_decided(run, decision)


def assemble(
    settings: Settings,
    registry: ActionRegistry,
    store: Store,
    *,
    clock: Clock | None = None,
    notifier: NotifierFactory | None = None,
) -> Application:
    """Wire the runtime and its notifier over an open store (``build_application`` opens it)."""
    connected = _Connected() if notifier is not None else None
    runtime = Runtime(
        registry,
        store,
        clock=clock or SystemClock(),
        instance_id=settings.instance_id or default_instance_id(),
        notifier=connected,
        input_limits=settings.input_limits,
        observer=settings.observer,
        lane=AsyncLane(tenant_share=settings.lane_tenant_share),
        pending_per_principal=settings.pending_per_principal,
    )
    if connected is not None and notifier is not None:
        connected.target = notifier(runtime)
    return Application(settings=settings, registry=registry, store=store, runtime=runtime)


async def build_application(
    settings: Settings,
    *,
    registry: ActionRegistry | None = None,
    store: Store | None = None,
    clock: Clock | None = None,
    notifier: NotifierFactory | None = None,
) -> Application:
    """The one place an application is assembled: manifests, store, runtime and notifier."""
    registry = registry if registry is not None else load_registry(settings.manifests_dir)
    store = (
        store
        if store is not None
        else await open_store(settings.database_url, upgrade=settings.upgrade_database)
    )
    return assemble(settings, registry, store, clock=clock, notifier=notifier)
