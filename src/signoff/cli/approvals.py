"""`signoff approvals list|show|approve|reject`: the operator's approval tool.

With ``--server URL --token JWT`` (``SIGNOFF_SERVER``, ``SIGNOFF_TOKEN``) every command is a
client of that server's JSON API (``remote.py``): the token names the approver and the server
executes. Without a server it works on the database: like stdio, it trusts the identity it is
given (``--as``, ``--tenant``, ``--roles``) and records channel ``cli`` with the OS user beside it.
Every decision goes through ``Runtime.decide``, so the rules are the server's; a refusal exits 1
with one line ending in the stable code.

A decision is bound to the run version the operator was shown: ``--version N`` (the ``version``
that ``approvals show`` prints), or, without it, the command fetches the run, prints what it is
deciding on (the input that will run, the amendments, the approvals still needed) and binds to
that version. When the run moved on in between, nothing is recorded: the fresh view is printed
and the command exits ``RUN_CHANGED`` (4) with ``APPROVAL_RUN_CHANGED``; decide again.
"""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from signoff.cli import remote
from signoff.cli.approval_views import RUN_CHANGED as RUN_CHANGED
from signoff.cli.approval_views import pending_table, print_decision, run_table
from signoff.cli.options import (
    DEFAULT_DATABASE_URL,
    DEFAULT_MANIFESTS,
    DatabaseOption,
    ManifestsOption,
)
from signoff.cli.plumbing import MISCONFIGURED, fail, with_application
from signoff.cli.remote import ServerOption, TokenOption
from signoff.cli.run_ids import resolve_run_id

if TYPE_CHECKING:
    from signoff.app import Application
    from signoff.core.approvals import DecisionResult
    from signoff.surfaces.access.caller import Caller

T = TypeVar("T")


TenantOption = Annotated[str, typer.Option("--tenant", help="The tenant whose runs to act on.")]
LocalTenantOption = Annotated[
    str | None,
    typer.Option("--tenant", help="The tenant whose runs to act on (not with --server)."),
]
AsOption = Annotated[
    str | None, typer.Option("--as", help="The approver's principal id (recorded as the decider).")
]
RolesOption = Annotated[
    str, typer.Option("--roles", help="The approver's roles, comma separated (e.g. billing-lead).")
]
# The bound (core.run.MAX_REASON_CHARS) is checked when the command runs.
ReasonOption = Annotated[
    str, typer.Option("--reason", help="Why; kept in the audit trail (at most 2000 characters).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
VersionOption = Annotated[
    int | None,
    typer.Option(
        "--version",
        min=1,
        help="The run version you were shown (`approvals show` prints it); without it the run "
        "is fetched, printed, and the decision bound to that version.",
    ),
]
RunIdArgument = Annotated[
    str,
    typer.Argument(
        help="The run's short id (the 12 characters tables show), any start of it of at least 6 "
        "characters, or the whole id."
    ),
]


def _operator() -> str:
    """The OS user running the command, recorded beside the approver identity."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _local_tenant(tenant: str | None) -> str:
    if tenant is None:
        fail("--tenant is required without --server", "INVALID_ARGUMENT", MISCONFIGURED)
    return tenant


def _no_identity_flags(**given: object) -> None:
    """With --server the token is the identity: flags that would claim one are refused."""
    named = [f"--{name.strip('_').replace('_', '-')}" for name, value in given.items() if value]
    if named:
        fail(
            f"{', '.join(named)} cannot be used with --server: the token names the approver",
            "INVALID_ARGUMENT",
            MISCONFIGURED,
        )


def _caller(name: str | None, tenant: str, roles: str) -> Caller:
    from signoff.core.codes import Code
    from signoff.surfaces.access.caller import IdentityError, make_caller

    try:
        return make_caller(name, tenant, roles)
    except IdentityError as exc:
        fail(str(exc).replace("--principal or SIGNOFF_PRINCIPAL", "--as"), Code.UNAUTHENTICATED)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    approvals = typer.Typer(
        rich_markup_mode=None,
        help="See and decide runs waiting for human approval (operator tool).",
        no_args_is_help=True,
    )
    app.add_typer(approvals, name="approvals")
    _add_list(approvals)
    _add_show(approvals)
    _add_decisions(approvals)


def _add_list(approvals: typer.Typer) -> None:
    @approvals.command("list")
    def list_pending(
        tenant: LocalTenantOption = None,
        name: AsOption = None,
        roles: RolesOption = "",
        limit: Annotated[int, typer.Option(min=1, max=1000, help="At most this many.")] = 100,
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        manifests: ManifestsOption = DEFAULT_MANIFESTS,
        as_json: JsonOption = False,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """Runs of --tenant waiting for approval; with --as/--roles, only those that approver
        could decide. With --server: the runs the token's approver could decide."""
        if server is not None:
            _no_identity_flags(tenant=tenant, as_=name, roles=roles)
            remote.list_pending(remote.ApiClient(server, token), limit, as_json)
            return
        tenant = _local_tenant(tenant)
        if roles and name is None:
            fail("--roles needs --as (whose roles they are)", "INVALID_ARGUMENT")
        caller = _caller(name, tenant, roles) if name is not None else None

        async def work(application: Application) -> None:
            from rich.console import Console

            from signoff.surfaces.web.run_json import run_json
            from signoff.surfaces.web.views import pending_for

            runs = await pending_for(application.runtime, tenant, caller, limit)
            if as_json:
                views = [run_json(application.runtime, r, caller) for r in runs]
                typer.echo(json.dumps({"approvals": views}))
                return
            Console().print(pending_table(application, runs))

        with_application(database, manifests, work)


def _add_show(approvals: typer.Typer) -> None:
    @approvals.command("show")
    def show(
        run_id: RunIdArgument,
        tenant: LocalTenantOption = None,
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        manifests: ManifestsOption = DEFAULT_MANIFESTS,
        as_json: JsonOption = False,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """One run of --tenant: what was proposed, by whom, and the decisions so far."""
        if server is not None:
            _no_identity_flags(tenant=tenant)
            remote.show(remote.ApiClient(server, token), run_id, as_json)
            return
        tenant = _local_tenant(tenant)

        async def work(application: Application) -> None:
            from rich.console import Console

            from signoff.core.codes import Code
            from signoff.surfaces.web.run_json import run_json

            full = await resolve_run_id(application.store, run_id, tenant)
            found = await application.runtime.get_run(full, tenant) if full else None
            if found is None:
                fail(f"no run {run_id} in tenant {tenant}", Code.ACTION_RUN_NOT_FOUND)
            if as_json:
                typer.echo(json.dumps(run_json(application.runtime, found, None)))
                return
            Console().print(run_table(application, found))

        with_application(database, manifests, work)


def _add_decisions(approvals: typer.Typer) -> None:
    def decide(verb: str) -> Callable[..., None]:
        def command(
            run_id: RunIdArgument,
            shown_version: VersionOption = None,
            name: AsOption = None,
            tenant: LocalTenantOption = None,
            roles: RolesOption = "",
            reason: ReasonOption = "",
            database: DatabaseOption = DEFAULT_DATABASE_URL,
            manifests: ManifestsOption = DEFAULT_MANIFESTS,
            as_json: JsonOption = False,
            server: ServerOption = None,
            token: TokenOption = None,
        ) -> None:
            from signoff.core.codes import Code
            from signoff.core.run import MAX_REASON_CHARS

            if len(reason) > MAX_REASON_CHARS:
                fail(
                    f"--reason has more than {MAX_REASON_CHARS} characters",
                    Code.INPUT_VALIDATION_FAILED,
                )
            if server is not None:
                _no_identity_flags(tenant=tenant, as_=name, roles=roles)
                remote.decide(
                    remote.ApiClient(server, token), run_id, verb, reason, as_json, shown_version
                )
                return
            if name is None:
                fail("--as is required without --server", "INVALID_ARGUMENT", MISCONFIGURED)
            from signoff.core.approvals import DecisionRequest
            from signoff.core.identity import Channel
            from signoff.core.run import ApprovalVote

            caller = _caller(name, _local_tenant(tenant), roles)

            async def work(application: Application) -> tuple[DecisionResult, int | None]:
                from rich.console import Console

                full = await resolve_run_id(application.store, run_id, caller.tenant_id)
                shown = await application.runtime.get_run(full, caller.tenant_id) if full else None
                version = shown_version
                if version is None and shown is not None:
                    # No version given: what the operator decides on is the run as printed now.
                    version = shown.version
                    if not as_json:
                        Console().print(run_table(application, shown))
                request = DecisionRequest(
                    approver=caller.principal,
                    vote=ApprovalVote.APPROVE if verb == "approve" else ApprovalVote.REJECT,
                    reason=reason,
                    channel=Channel.CLI,
                    via=_operator(),
                    expected_version=version,
                    # Decisions are data: a serving process dispatches an approved run.
                    dispatch=False,
                )
                result = await application.runtime.decide(full or run_id, caller.tenant_id, request)
                fresh = None
                if result.code == Code.APPROVAL_RUN_CHANGED and full:
                    fresh = await application.runtime.get_run(full, caller.tenant_id)
                    if fresh is not None and not as_json:
                        Console().print(run_table(application, fresh))
                return result, fresh.version if fresh is not None else None

            result, current = with_application(database, manifests, work)
            print_decision(result, verb, as_json, current)

        command.__doc__ = (
            f"{verb.capitalize()} RUN_ID: with --server/--token through the server (which "
            "executes), else as --as with --roles on the database; the run's rules decide whether "
            "it counts. The decision is bound to --version (or to the run as fetched and "
            "printed).\n\nExit 0: recorded, and the run ended (or goes on) as meant; 1: not "
            "recorded; 2: usage; 3: recorded, but the run then ended otherwise (e.g. denied by "
            "the guard); 4: the run changed since that version, nothing recorded (the fresh view "
            "is printed). See docs/cli.md."
        )
        return command

    approvals.command("approve")(decide("approve"))
    approvals.command("reject")(decide("reject"))
