"""`signoff demo`: the demo actions over HTTP on localhost, with tokens and a host snippet ready.

The runs live in the default database (``signoff.db``) and the demo invoices in
``demo-invoices.db``, both in the current directory, so the operator CLI works there without
flags. Every command it prints names the ``signoff`` and ``python`` of this install by path, so it
runs as printed from any directory (``tests/surfaces/test_demo_commands.py`` runs them). The generated HS256 secret and the printed tokens
are kept in ``.signoff-demo/`` (git-ignored, mode 0700) so tokens stay valid across restarts.
Nothing secret is committed.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from signoff.cli.hosting import HostOption, PortOption
from signoff.cli.options import DEFAULT_DATABASE_URL, DatabaseOption, ManifestsOption
from signoff.cli.plumbing import fail
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.store.factory import MEMORY_URL
from signoff.surfaces.addresses import is_loopback

if TYPE_CHECKING:
    from signoff.app import Application

DEMO_TENANT = "demo"
# Where the demo invoices domain (signoff.demo.invoices) keeps its own tables (its default file name).
INVOICES_DB_ENV = "SIGNOFF_DEMO_INVOICES_DB"
INVOICES_DB_DEFAULT = "demo-invoices.db"
AGENT = ("demo-agent", ("billing",))
APPROVER = ("demo-lead", ("billing-lead",))
TOKEN_TTL_SECONDS = 7 * 24 * 3600
# The checkout this module sits in, when it runs from one (src/signoff/cli/demo.py).
_REPO = Path(__file__).resolve().parents[3]


def demo(
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    manifests: ManifestsOption = str(DEMO_MANIFESTS),
    database: DatabaseOption = DEFAULT_DATABASE_URL,
    state_dir: Annotated[
        Path, typer.Option("--state-dir", help="Where the demo keeps its secret and tokens.")
    ] = Path(".signoff-demo"),
    memory: Annotated[
        bool, typer.Option("--memory", help="Use a throwaway in-memory store instead of SQLite.")
    ] = False,
) -> None:
    """Serve the demo actions over HTTP on localhost and print how to connect.

    This is `signoff serve --transport http` with demo settings: a generated HS256 secret (kept in
    --state-dir with the printed tokens), the inbox and API, /healthz, /readyz, /metrics and the
    landing page, manifest reloading, and a graceful exit 0 on SIGTERM or Ctrl-C.
    """
    from signoff.cli.hosting import misconfigured, serve_application
    from signoff.cli.serve_settings import ServeSettings
    from signoff.cli.serving import run_http
    from signoff.observability.logs import configure_logging
    from signoff.observability.observer import OperationsObserver
    from signoff.surfaces.access.jwt import JwtConfig, JwtVerifier
    from signoff.surfaces.mcp.http import BearerAuth, HttpOptions
    from signoff.surfaces.web import WebConfig, WebNotifications

    if not is_loopback(host):
        misconfigured("the demo serves on a loopback address only (its tokens are printed)")
    state = state_dir.resolve()
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = _secret(state / "jwt-secret")
    # Absolute, so a stdio server launched by an MCP host from elsewhere shares the same files.
    os.environ.setdefault(INVOICES_DB_ENV, str(Path(INVOICES_DB_DEFAULT).resolve()))
    database = MEMORY_URL if memory else absolute_sqlite(database)
    manifests_dir = Path(manifests).resolve()

    # Listen before printing, so whoever reads the instructions can connect at once.
    try:
        listener = _listen(host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}", "PORT_UNAVAILABLE")
    port = listener.getsockname()[1]  # --port 0: the one the system chose
    public_url = f"http://{host}:{port}"
    settings = ServeSettings.resolve(host=host, port=port, log_level="warning")
    configure_logging(settings.log_format, settings.log_level)
    auth = BearerAuth(JwtVerifier(JwtConfig(secret=secret)), public_url)
    web_config = WebConfig(public_url=public_url, session_secret=_secret(state / "session-secret"))
    notifications = WebNotifications(web_config)
    options = HttpOptions(task_secret=_secret(state / "task-secret").encode())

    def serving() -> None:
        # Printed once SIGTERM is a graceful stop, so whoever follows them can also stop it.
        _print_instructions(state, public_url, secret, database, manifests_dir)

    async def body(application: Application) -> None:
        await run_http(
            application,
            auth,
            options,
            web_config,
            notifications,
            settings,
            True,
            sockets=[listener],
            on_started=serving,
        )

    serve_application(
        database,
        str(manifests_dir),
        body,
        notifier=notifications,
        observer=OperationsObserver(log_inputs=False, trace_payloads=False),
    )


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: uvicorn sets TCP_NODELAY only on sockets it recognises as TCP.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def _secret(path: Path) -> str:
    if path.exists():
        return path.read_text().strip()
    value = secrets.token_urlsafe(48)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    return value


def absolute_sqlite(url: str) -> str:
    """``sqlite+aiosqlite:///signoff.db`` -> the same file by absolute path; other URLs as given."""
    prefix = "sqlite+aiosqlite:///"
    if not url.startswith(prefix) or url.startswith(prefix + "/") or ":memory:" in url:
        return url
    return prefix + str(Path(url.removeprefix(prefix)).resolve())


def _agent_session() -> Path | None:
    """The example agent script, where this install has it (a checkout's ``examples/``)."""
    for candidate in (Path("examples/agent_session.py"), _REPO / "examples" / "agent_session.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _signoff_command() -> str:
    beside = Path(sys.executable).parent / "signoff"
    if beside.exists():
        return str(beside)
    return shutil.which("signoff") or "signoff"


def stdio_snippet(database: str, manifests: Path) -> dict[str, Any]:
    """An ``mcpServers`` entry that launches signoff over stdio as the demo agent."""
    subject, roles = AGENT
    return {
        "mcpServers": {
            "signoff": {
                "command": _signoff_command(),
                "args": [
                    "serve",
                    "--transport",
                    "stdio",
                    "--database",
                    database,
                    "--manifests",
                    str(manifests),
                ],
                "env": {
                    "SIGNOFF_PRINCIPAL": subject,
                    "SIGNOFF_TENANT": DEMO_TENANT,
                    "SIGNOFF_ROLES": ",".join(roles),
                    INVOICES_DB_ENV: os.environ.get(INVOICES_DB_ENV, ""),
                },
            }
        }
    }


def _print_instructions(
    state: Path, public_url: str, secret: str, database: str, manifests: Path
) -> None:
    from signoff.surfaces.access.jwt import issue_token
    from signoff.surfaces.access.scopes import Scopes

    scopes = Scopes()
    agent_token = issue_token(
        secret,
        AGENT[0],
        DEMO_TENANT,
        AGENT[1],
        ttl_seconds=TOKEN_TTL_SECONDS,
        scopes=[scopes.propose],
    )
    lead_token = issue_token(
        secret,
        APPROVER[0],
        DEMO_TENANT,
        APPROVER[1],
        ttl_seconds=TOKEN_TTL_SECONDS,
        scopes=[scopes.approve],
    )
    for name, token in (("agent.token", agent_token), ("approver.token", lead_token)):
        (state / name).write_text(token + "\n")
    url = f"{public_url}/mcp"
    echo = typer.echo
    echo(f"signoff demo — MCP over streamable HTTP at {url}")
    echo(f"  database:  {database}")
    echo(f"  manifests: {manifests}")
    echo("")
    echo(
        f"Agent token   ({AGENT[0]}, tenant {DEMO_TENANT}, roles {','.join(AGENT[1])}, "
        f"scope {scopes.propose}; for /mcp only):"
    )
    echo(f"  {agent_token}")
    echo(
        f"Approver token ({APPROVER[0]}, tenant {DEMO_TENANT}, roles {','.join(APPROVER[1])}, "
        f"scope {scopes.approve}; for the inbox and /api only):"
    )
    echo(f"  {lead_token}")
    signoff = shlex.quote(_signoff_command())
    as_lead = f"SIGNOFF_TOKEN=$(cat {shlex.quote(str(state / 'approver.token'))})"
    story = _agent_session()
    if story is not None:
        echo("")
        echo("The whole story as an agent (list tools, a read, a write that waits for approval):")
        echo(
            f"  SIGNOFF_URL={url} SIGNOFF_TOKEN=$(cat {shlex.quote(str(state / 'agent.token'))}) "
            f"{shlex.quote(sys.executable)} {shlex.quote(str(story))}"
        )
    echo("")
    echo(f"A billing lead approves in the inbox at {public_url}/approvals (paste the approver")
    echo("token to sign in), or from the command line (RUN_ID: the short id the list shows):")
    echo(f"  {as_lead} {signoff} approvals list --server {public_url}")
    echo(f"  {as_lead} {signoff} approvals approve RUN_ID --server {public_url} --reason checked")
    echo(f"Health, readiness and metrics: {public_url}/healthz, /readyz, /metrics")
    echo("")
    echo("A token for other roles (here an approver of tenant demo with role billing-admin):")
    echo(
        f"  SIGNOFF_DEV_JWT_SECRET=$(cat {shlex.quote(str(state / 'jwt-secret'))}) {signoff} "
        f"token mint --sub demo-admin --tenant {DEMO_TENANT} --roles billing-admin --scope approve"
    )
    echo("")
    echo("Claude Code over HTTP:")
    echo(
        f'  claude mcp add --transport http signoff {url} --header "Authorization: Bearer '
        f'{agent_token}"'
    )
    echo("")
    echo("Claude Desktop / Claude Code over stdio (mcpServers):")
    if database == MEMORY_URL:
        echo("  (in-memory store: a stdio server would not share this server's runs)")
    echo(json.dumps(stdio_snippet(database, manifests), indent=2))
    echo("")
    echo(f"Ctrl-C stops the server; state is kept in {state}.")
    sys.stdout.flush()
