"""`signoff approvals ... --server URL --token JWT`: the CLI as a client of the approvers' JSON API.

The token names the approver (its ``sub``, ``roles``, ``tenant``) and must be an approver's
credential (scope ``signoff:approve``, not ``signoff:propose``); the server decides and, when the
decision completes the quorum, executes the action in its own process, with its own environment
and manifests. Nothing here opens the database or imports an executor.

A token travels only over HTTPS, or plain HTTP to a loopback address.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, NoReturn
from urllib.parse import quote, urlsplit

import typer

from signoff.cli.intent import exit_unless_intended
from signoff.cli.plumbing import MISCONFIGURED, fail
from signoff.surfaces.addresses import is_loopback

ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        envvar="SIGNOFF_SERVER",
        help="Decide through this server's JSON API (https://..., or http:// on loopback).",
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="SIGNOFF_TOKEN",
        help="With --server: the approver's bearer token (prefer the SIGNOFF_TOKEN variable).",
        show_default=False,
    ),
]
# Seconds: the whole request, and connecting.
TIMEOUT_SECONDS, CONNECT_SECONDS = 30.0, 5.0
# How an HTTP status the API answers without a JSON code reads (core.codes.Code's values).
_STATUS_CODES = {
    401: "UNAUTHENTICATED",
    403: "INSUFFICIENT_SCOPE",
    404: "ACTION_RUN_NOT_FOUND",
}


class ApiClient:
    """One approver talking to one server."""

    def __init__(self, server: str, token: str | None) -> None:
        self.base = check_server_url(server)
        if not token or not token.strip():
            fail("--server needs the approver's token: --token or SIGNOFF_TOKEN", "UNAUTHENTICATED")
        self._headers = {"Authorization": f"Bearer {token.strip()}", "Accept": "application/json"}

    def get(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self._call("GET", path, params=params)

    def post(
        self, path: str, body: Mapping[str, Any], *, answered: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """POST ``body``; a refusal whose code is in ``answered`` is returned, not failed."""
        return self._call("POST", path, answered=answered, json=body)

    def _call(
        self, method: str, path: str, *, answered: frozenset[str] = frozenset(), **options: Any
    ) -> dict[str, Any]:
        import httpx

        timeout = httpx.Timeout(TIMEOUT_SECONDS, connect=CONNECT_SECONDS)
        try:
            with httpx.Client(timeout=timeout, follow_redirects=False) as http:
                response = http.request(method, self.base + path, headers=self._headers, **options)
        except httpx.HTTPError as exc:
            fail(f"cannot reach {self.base}: {type(exc).__name__}", "SERVER_UNREACHABLE")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            _refused(response.status_code, None, f"the server answered HTTP {response.status_code}")
        if response.status_code >= 400 and body.get("code") in answered:
            return body
        if response.status_code >= 400 and "code" in body:
            _refused(response.status_code, body, str(body.get("message") or ""))
        if response.status_code >= 400:
            _refused(response.status_code, None, f"the server answered HTTP {response.status_code}")
        return body


def _refused(status: int, body: Mapping[str, Any] | None, message: str) -> NoReturn:
    code = str(body["code"]) if body is not None else _STATUS_CODES.get(status, "SERVER_ERROR")
    fail(f"refused by the server: {message}".rstrip(": "), code)


def check_server_url(server: str) -> str:
    """The base URL without a trailing slash; a bearer token never crosses a network in clear."""
    parts = urlsplit(server.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"--server must be an http(s) URL, got {server!r}", "INVALID_ARGUMENT", MISCONFIGURED)
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        fail(
            "--server over plain http would send the token in clear: use https (plain http only "
            "to a loopback address)",
            "INSECURE_SERVER_URL",
            MISCONFIGURED,
        )
    return server.strip().rstrip("/")


def run_path(run_id: str) -> str:
    return f"/api/runs/{quote(run_id, safe='')}"


def decide(
    client: ApiClient,
    run_id: str,
    verb: str,
    reason: str,
    as_json: bool,
    version: int | None = None,
) -> None:
    """POST the decision bound to ``version`` (without one: fetch the run, print it, bind to
    its version); print it like a local decision; refusals exit 1 with the code, a run that
    changed since that version exits 4 (``approvals.RUN_CHANGED``) after printing the fresh view."""
    from signoff.cli.approvals import RUN_CHANGED

    if version is None:
        shown = client.get(run_path(run_id))
        version = int(shown.get("version") or 0) or None
        if not as_json:
            print_run(run_id, shown)
    answer = client.post(
        f"{run_path(run_id)}/{verb}",
        {"reason": reason, "expected_version": version},
        answered=frozenset({"APPROVAL_RUN_CHANGED"}),
    )
    if as_json:
        typer.echo(json.dumps(answer))
    if answer.get("code") == "APPROVAL_RUN_CHANGED":
        fresh = answer.get("run")
        if isinstance(fresh, dict) and not as_json:
            print_run(run_id, fresh)
        fail(
            f"decision not recorded: {answer.get('message', '')} (the run is now at version "
            f"{answer.get('current_version', '?')}; decide again on it)",
            "APPROVAL_RUN_CHANGED",
            RUN_CHANGED,
        )
    outcome = answer.get("outcome")
    if not answer.get("accepted"):
        fail(f"decision not recorded: {answer.get('message', '')}", str(answer.get("code")))
    if not isinstance(outcome, dict):
        return
    if not as_json:
        typer.echo(
            f"decision recorded [{answer.get('code')}]; run {outcome.get('run_id')} is now "
            f"{outcome.get('status')} [{outcome.get('code')}] {outcome.get('message', '')}".rstrip()
        )
    exit_unless_intended(
        verb, str(outcome.get("run_id")), str(outcome.get("status")), str(outcome.get("code"))
    )


def list_pending(client: ApiClient, limit: int, as_json: bool) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from signoff.core.short_ids import SHORT_CHARS, short_id

    answer = client.get("/api/approvals", {"limit": str(limit)})
    if as_json:
        typer.echo(json.dumps(answer))
        return
    runs = [run for run in answer.get("approvals", []) if isinstance(run, dict)]
    table = Table(title=f"{len(runs)} run{'s' * (len(runs) != 1)} waiting for approval")
    # An id is copied and pasted: the short one, never wrapped, whatever the terminal width.
    table.add_column("run", no_wrap=True, min_width=SHORT_CHARS)
    for column in ("action", "proposed by", "resource", "risk", "input", "expires", "approvals"):
        table.add_column(column, overflow="fold")
    for run in runs:
        approval = run.get("approval") or {}
        principal = run.get("principal") or {}
        cells = (
            short_id(str(run.get("run_id", ""))),
            str(run.get("action", "")),
            f"{run.get('proposer_type', '')} {principal.get('id', '')}",
            str(run.get("resource") or ""),
            str(run.get("risk") or "?"),
            "\n".join(f"{k}: {v}" for k, v in (run.get("input") or {}).items())
            + ("\n(amended)" if run.get("amended") else ""),
            str(approval.get("expires_at") or ""),
            _progress(approval),
        )
        table.add_row(*(escape(cell) for cell in cells))
    Console().print(table)


def _progress(approval: Mapping[str, Any]) -> str:
    """``1/2 (billing-lead), 1 more needed``: approvals that stand, over what the run needs."""
    if not approval:
        return ""
    roles = ", ".join(str(r) for r in approval.get("approver_roles") or [])
    left = approval.get("approvals_still_needed") or 0
    more = f", {left} more needed" if left else ""
    return (
        f"{approval.get('approvals_received', 0)}/{approval.get('approvals_needed', '?')} "
        f"({roles}){more}"
    )


def show(client: ApiClient, run_id: str, as_json: bool) -> None:
    answer = client.get(run_path(run_id))
    if as_json:
        typer.echo(json.dumps(answer))
        return
    print_run(run_id, answer)


def print_run(run_id: str, answer: Mapping[str, Any]) -> None:
    """One run as the API returned it: the input that will run, the amendments, the approvals
    still needed and the version a decision binds to."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from signoff.core.statuses import shown_status

    table = Table(title=f"run {run_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    outcome = answer.get("outcome") or {}
    amendments = [a for a in answer.get("amendments") or [] if isinstance(a, dict)]
    rows = {
        "action": str(answer.get("action", "")),
        "status": shown_status(str(answer.get("status", ""))),
        "version": str(answer.get("version", "")),
        "proposed by": str((answer.get("principal") or {}).get("id", "")),
        "resource": str(answer.get("resource") or ""),
        "will run" if amendments else "input": json.dumps(
            answer.get("input") or {}, ensure_ascii=False
        ),
    }
    if amendments:
        rows["proposed"] = json.dumps(answer.get("proposed_input") or {}, ensure_ascii=False)
    for index, a in enumerate(amendments, 1):
        changes = a.get("changes") or {}
        previous = a.get("previous") or {}
        rows[f"amendment {index}"] = (
            f"{a.get('approver_id', '')} (version {a.get('version')}): "
            + ("; ".join(f"{k} {previous.get(k)} → {v}" for k, v in changes.items()))
        )
    approval = answer.get("approval") or {}
    if approval:
        rows["approvals"] = _progress(approval)
    rows["outcome"] = f"{outcome.get('status', '')} [{outcome.get('code', '')}]"
    for name, value in rows.items():
        table.add_row(name, escape(value))
    Console().print(table)
