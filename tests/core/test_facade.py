"""``Runtime`` is the narrow facade: nothing on it can change a run except a governed operation."""

from __future__ import annotations

import inspect
import re

from signoff import Code, ExecutionResult, ExecutionStatus, Principal
from signoff.audit_check import check_trail
from signoff.core.registry import ActionRegistry
from signoff.core.run import RunStatus
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import (
    AGENT,
    LARGE,
    LEAD,
    Recorder,
    approve,
    definition,
    memory_runtime,
    proposal,
)

# Words that name commit machinery: a public name containing one hands a surface the means to
# write a run (or to reach what writes it) without passing the stages.
MACHINERY = {
    "load",
    "cas",
    "compare",
    "terminal",
    "finish",
    "dispatch",
    "dispatcher",
    "execute",
    "claim",
    "attempt",
    "context",
    "recheck",
    "lane",
    "notify",
    "store",
    "unit",
    "ledger",
    "registry",
    "advance",
    "commit",
    "write",
    "create",
    "resume",
    "expire",
}
# Housekeeping chores that use such words but only run the governed transitions themselves.
CHORES = {"expire_overdue", "dispatch_approved"}


def public_names(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def machinery_in(names: set[str]) -> set[str]:
    return {
        name
        for name in names - CHORES
        if MACHINERY & set(re.split(r"_+", name.lower())) or name.lower() in MACHINERY
    }


def test_the_runtime_exposes_no_commit_machinery() -> None:
    assert machinery_in(public_names(Runtime)) == set()
    runtime = memory_runtime(definition(Recorder()))
    assert {name for name in vars(runtime) if not name.startswith("_")} == set()


def test_every_public_name_of_the_runtime_is_a_governed_operation_a_read_or_a_chore() -> None:
    assert public_names(Runtime) == {
        # governed operations
        "propose",
        "confirm",  # the requester's own answer to its pending confirmation
        "decide",
        "cancel",
        "complete",
        "redispatch",
        # reads, scoped to a tenant
        "get",
        "get_run",
        "confirmation_request",  # what the requester is shown (its own pending run only)
        "resolve_id",  # a person's short run id, among the runs the reader may see
        "wait",
        "list_runs",
        "page_runs",
        "audit_trail",
        "limit_usage",
        "action",
        "action_for_tool",
        "actions",
        "not_found",
        "now",
        "instance_id",
        "worker_id",
        "background_usage",  # for metrics: how much background work this process holds
        # recovery and housekeeping
        "recover",
        "recover_running",
        "expire_overdue",
        "dispatch_approved",
        "sweep_external",
        "purge_duplicates",
        "heartbeat",
        "drain",
        "shutdown",  # SIGTERM: end this process's background work within the grace
    }


def test_the_facade_check_notices_commit_machinery_on_a_runtime() -> None:
    class Leaky(Runtime):
        async def load(self, run_id: str) -> None: ...

        def cas_with_audit(self) -> None: ...

        @property
        def store(self) -> None: ...

    assert machinery_in(public_names(Leaky)) == {"load", "cas_with_audit", "store"}


def test_no_public_method_of_the_runtime_takes_a_run_to_write() -> None:
    """Operations take ids, tenants and requests; never an ``ActionRun`` to commit."""
    for name in public_names(Runtime):
        member = getattr(Runtime, name)
        if not callable(member):
            continue
        for parameter in inspect.signature(member).parameters.values():
            assert "ActionRun" not in str(parameter.annotation), (name, parameter.name)


async def test_a_surface_cannot_dispatch_a_run_that_is_waiting_for_approval() -> None:
    """Everything the facade offers, tried by a surface holding only the runtime: the run keeps
    waiting, nothing executes, and the audit trail stays consistent."""
    recorder = Recorder()
    store = InMemoryStore()
    runtime = Runtime(ActionRegistry([definition(recorder)]), store)
    pending = await runtime.propose(proposal(LARGE))
    assert pending.status is ExecutionStatus.PENDING_APPROVAL
    run_id = pending.run_id

    run = await runtime.get_run(run_id, "acme")
    assert run is not None and run.attempt_token is None  # no attempt exists to complete
    for token in ("", "0" * 16, run.run_id):
        completion = await runtime.complete(run_id, token, ExecutionResult.succeeded())
        assert not completion.accepted and completion.code == Code.STALE_ACTION_ATTEMPT
    own = await runtime.decide(run_id, "acme", approve(AGENT))
    assert own.code == Code.APPROVER_NOT_ELIGIBLE
    unrelated = await runtime.decide(run_id, "acme", approve(Principal(id="x", roles=("billing",))))
    assert unrelated.code == Code.APPROVER_NOT_ELIGIBLE
    foreign = await runtime.decide(run_id, "globex", approve())
    assert foreign.code == Code.ACTION_RUN_NOT_FOUND
    await runtime.recover()
    await runtime.recover(instance_id="default")
    await runtime.recover_running()
    await runtime.expire_overdue()
    await runtime.sweep_external()
    await runtime.drain()

    run = await runtime.get_run(run_id, "acme")
    assert run is not None and run.status is RunStatus.WAITING_APPROVAL
    assert recorder.count == 0
    assert check_trail(run, await runtime.audit_trail(run_id, "acme")) == []

    approved = await runtime.decide(run_id, "acme", approve(LEAD))
    assert approved.outcome is not None and approved.outcome.code == Code.SUCCEEDED
    assert recorder.count == 1
    run = await runtime.get_run(run_id, "acme")
    assert run is not None
    assert check_trail(run, await runtime.audit_trail(run_id, "acme")) == []


async def test_the_audit_trail_of_another_tenants_run_reads_like_a_missing_one() -> None:
    runtime = memory_runtime(definition(Recorder()))
    pending = await runtime.propose(proposal(LARGE))
    assert await runtime.audit_trail(pending.run_id, "globex") == []
    assert await runtime.audit_trail("no-such-run", "acme") == []
    (first, *_) = await runtime.audit_trail(pending.run_id, "acme")
    assert first.kind == "proposed"
