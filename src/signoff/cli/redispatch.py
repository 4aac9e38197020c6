"""`signoff runs redispatch RUN_ID`: an operator re-dispatches a MANUAL_REVIEW run.

Only for an idempotent executor, with the run's own operation id, through the governed path
(``Runtime.redispatch``: re-resolve, re-validate, current policy, guard). Like ``signoff
approvals``, it trusts the identity it is given (``--as``, ``--tenant``, ``--roles``, which must
hold one of the action's approver roles) and records channel ``cli`` with the OS user. The side
effect runs in this process. A refusal exits 1 with one line ending in the stable code.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from signoff.cli.approvals import AsOption, JsonOption, RolesOption, RunIdArgument, TenantOption
from signoff.cli.approvals import _caller as caller_of
from signoff.cli.approvals import _operator as os_user
from signoff.cli.options import (
    DEFAULT_DATABASE_URL,
    DEFAULT_MANIFESTS,
    DatabaseOption,
    ManifestsOption,
)
from signoff.cli.plumbing import fail, with_application
from signoff.cli.run_ids import resolve_run_id

if TYPE_CHECKING:
    from signoff.app import Application
    from signoff.core.results import ActionOutcome


def redispatch(
    run_id: RunIdArgument,
    tenant: TenantOption,
    reason: Annotated[
        str, typer.Option("--reason", help="Why it is safe now (audited; required).")
    ],
    name: AsOption = None,
    roles: RolesOption = "",
    database: DatabaseOption = DEFAULT_DATABASE_URL,
    manifests: ManifestsOption = DEFAULT_MANIFESTS,
    as_json: JsonOption = False,
) -> None:
    """Re-dispatch RUN_ID (FAILED / MANUAL_REVIEW, idempotent executor) with its operation id."""
    from signoff.core.codes import Code
    from signoff.core.identity import Channel
    from signoff.core.run import MAX_REASON_CHARS
    from signoff.core.runtime import RepairRequest

    if not reason.strip() or len(reason) > MAX_REASON_CHARS:
        fail("--reason is required (at most 2000 characters)", Code.INPUT_VALIDATION_FAILED)
    caller = caller_of(name, tenant, roles)
    request = RepairRequest(caller.principal, reason, channel=Channel.CLI, via=os_user())

    async def work(application: Application) -> tuple[str, ActionOutcome]:
        full = await resolve_run_id(application.store, run_id, tenant) or run_id
        return full, await application.runtime.redispatch(full, tenant, request)

    full, outcome = with_application(database, manifests, work)
    from signoff.core.repair import REFUSALS

    redispatched = outcome.code not in REFUSALS and outcome.run_id != full
    if as_json:
        payload = {"code": outcome.code, "redispatched": redispatched}
        typer.echo(json.dumps({**payload, "outcome": outcome.model_dump(mode="json")}))
    if not redispatched:
        fail(f"not re-dispatched: {outcome.message}", outcome.code)
    if not as_json:
        typer.echo(
            f"re-dispatched {full} as run {outcome.run_id}: {outcome.status} "
            f"[{outcome.code}] {outcome.message}".rstrip()
        )


def register(runs: typer.Typer) -> None:
    runs.command("redispatch")(redispatch)
