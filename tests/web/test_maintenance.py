"""The housekeeping loop: expiry, orphans, heartbeat, duplicate retention, and its lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from signoff import Code, RunStatus
from signoff.app import Settings, start_application
from signoff.core.clock import ManualClock
from signoff.core.registry import ActionRegistry
from signoff.maintenance import Maintenance, maintenance
from signoff.store.memory import InMemoryStore, InMemoryWorkerRegistry
from tests.helpers import LARGE, SMALL, Recorder, proposal, stored_run
from tests.surfaces.support import DEADLINE
from tests.web.support import ExternalSystem, Site, invoice_actions, site_for_tests


async def test_a_tick_expires_overdue_approvals_and_completes_their_reservation(
    site: Site,
) -> None:
    pending = await site.propose(key="k")
    site.clock.advance(timedelta(hours=25))
    report = await Maintenance(site.runtime, site.store).tick()
    assert report.expired == 1
    run = await stored_run(site.store, pending.run_id)
    assert run is not None and run.status is RunStatus.EXPIRED
    assert run.result is not None and run.result.code == Code.APPROVAL_EXPIRED
    async with site.store.unit() as unit:
        kinds = [(e.kind, e.actor) for e in await unit.audit.list_for_run(pending.run_id)]
    assert ("approval_expired", "signoff") in kinds
    replay = await site.propose(key="k")
    assert (replay.code, replay.duplicate_of) == (Code.APPROVAL_EXPIRED, pending.run_id)


async def test_a_tick_applies_the_orphan_policy_to_overdue_external_work(site: Site) -> None:
    deferred = await site.propose(action="payout.send", key="p")
    site.clock.advance(timedelta(minutes=11))
    report = await Maintenance(site.runtime, site.store).tick()
    assert report.orphaned == 1
    outcome = await site.runtime.get(deferred.run_id, "acme")
    assert outcome is not None and outcome.code == Code.ACTION_EXTERNAL_TIMEOUT


async def test_a_tick_forgets_completed_duplicates_after_the_retention(site: Site) -> None:
    first = await site.propose(SMALL, key="same")
    assert first.code == Code.SUCCEEDED
    site.clock.advance(timedelta(hours=2))
    kept = await Maintenance(site.runtime, site.store, retention=timedelta(hours=24)).tick()
    assert kept.purged == 0
    site.clock.advance(timedelta(hours=23))
    purged = await Maintenance(site.runtime, site.store, retention=timedelta(hours=24)).tick()
    assert purged.purged == 1
    again = await site.propose(SMALL, key="same")
    assert again.code == Code.SUCCEEDED and again.duplicate_of is None
    assert site.recorder.count == 2


async def test_a_tick_keeps_this_incarnation_visibly_alive(site: Site) -> None:
    await Maintenance(site.runtime, site.store).tick()
    seen = await site.store.workers.last_seen([site.runtime.worker_id])
    assert seen == {site.runtime.worker_id: site.clock.now()}


class BrokenWorkers(InMemoryWorkerRegistry):
    async def heartbeat(
        self, worker_id: str, now: datetime, revisions: Mapping[str, str] | None = None
    ) -> None:
        raise ConnectionError("database unreachable")


async def test_a_failing_step_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryStore()
    store.workers = BrokenWorkers()
    async with site_for_tests(store) as site:
        await site.propose()
        site.clock.advance(timedelta(hours=25))
        with caplog.at_level(logging.ERROR, logger="signoff.maintenance"):
            report = await Maintenance(site.runtime, site.store).tick()
    assert report.failures == ["heartbeat"] and report.expired == 1
    assert any("heartbeat" in record.getMessage() for record in caplog.records)


async def test_the_loop_ticks_in_the_background_and_stops_with_its_block(site: Site) -> None:
    async with maintenance(site.runtime, site.store, every=0.01) as loop:
        await asyncio.wait_for(loop.wait_for_ticks(3), DEADLINE)
        assert not loop.finished.is_set()
    assert loop.ticks >= 3
    assert loop.finished.is_set()


async def test_a_started_server_application_runs_the_sweeper_until_it_closes() -> None:
    """Every transport's server starts here, so every one of them sweeps."""
    store, clock = InMemoryStore(), ManualClock()
    registry = ActionRegistry(invoice_actions(Recorder(), ExternalSystem()))
    application = await start_application(
        Settings(), registry=registry, store=store, clock=clock, housekeeping_every=0.01
    )
    try:
        assert application.housekeeping is not None
        pending = await application.runtime.propose(proposal(LARGE))
        run = await stored_run(store, pending.run_id)
        clock.advance(timedelta(hours=25))
        # Not through Runtime.get: that would expire the run itself on reading it.
        await store.wait_for_change(pending.run_id, run.version, DEADLINE)
        expired = await stored_run(store, pending.run_id)
        assert expired.status is RunStatus.EXPIRED
    finally:
        await application.close()
    assert application.housekeeping.finished.is_set()


async def test_a_tick_signs_audit_checkpoints_of_moved_heads_once_per_interval(
    site: Site,
) -> None:
    import base64

    from signoff.audit.keys import KeyRing
    from signoff.audit.verify import verify_trail

    secret = base64.b64encode(b"s" * 32).decode()
    keys = KeyRing.parse(
        {"signing_key": "k", "keys": [{"id": "k", "algorithm": "hmac-sha256", "secret": secret}]},
        base=Path("."),
    )
    chores = Maintenance(site.runtime, site.store, audit_keys=keys, checkpoint_every=3600)
    await site.propose(SMALL, key="a")
    assert (await chores.tick()).checkpoints == 1
    await site.propose(SMALL, key="b")
    assert (await chores.tick()).checkpoints == 0  # within the interval
    site.clock.advance(timedelta(hours=1))
    assert (await chores.tick()).checkpoints == 1
    site.clock.advance(timedelta(hours=1))
    assert (await chores.tick()).checkpoints == 0  # the head has not moved
    report = await verify_trail(site.store, keys)
    assert report.problems == []
    assert (report.checkpoints, report.unverified_checkpoints) == (2, 0)
