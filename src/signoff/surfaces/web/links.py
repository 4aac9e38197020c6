"""One-time decision links: an approver decides from a phone without signing in.

A link is ``/approvals/links/TOKEN``, where ``TOKEN`` is 256 random bits. signoff stores only its
SHA-256, bound to one run **at one version**, one approver identity (id, roles, tenant) and a short
lifetime (``SIGNOFF_LINK_TTL_MINUTES``, 15 minutes by default).

- ``GET`` only shows a confirmation page with the run's details; it never decides (link
  previewers, mail scanners and prefetchers follow GETs).
- ``POST`` (the page's Approve or Reject button) re-checks everything — the link is known, unused
  and unexpired, the run is still waiting at the same version, the approver is still eligible —
  then marks the link used (one conditional write: of racing redeemers exactly one wins) and
  hands the decision to ``Runtime.decide`` with channel ``ui`` and ``via: link``, whose rules are
  the same as everywhere else.
- A used, expired, unknown (tampered) or stale link says so plainly, with a stable code.

Links are issued for the approvers of ``SIGNOFF_APPROVERS`` whose roles the approval names and go
out in the webhook notification; after each recorded decision the run's version moves on, so the
remaining approvers receive fresh links with the ``approval.decided`` notification.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.core import substance
from signoff.core.approval_digest import short_digest
from signoff.core.approvals import DecisionRequest, approver_refusal
from signoff.core.codes import Code
from signoff.core.decisions import still_needed
from signoff.core.identity import Channel, Principal
from signoff.core.ports import ApprovalLink, LinkStore
from signoff.core.registry import CompiledAction
from signoff.core.run import ActionRun, ApprovalVote, RunStatus
from signoff.core.runtime import Runtime
from signoff.core.statuses import shown_status
from signoff.surfaces.web.config import WebConfigError
from signoff.surfaces.web.http import read_form
from signoff.surfaces.web.session import Sessions
from signoff.surfaces.web.views import (
    action_facts,
    amendment_views,
    approval_reason,
    describe,
    input_fields,
    now,
    preview_fields,
    relative,
)

PREFIX = "/approvals/links/"
DEFAULT_LINK_TTL = timedelta(minutes=15)
MAX_REASON = 2000
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{43}$")
_VOTES = {"approve": ApprovalVote.APPROVE, "reject": ApprovalVote.REJECT}

LINK_INVALID = "LINK_INVALID"
LINK_USED = "LINK_USED"
LINK_EXPIRED = "LINK_EXPIRED"
LINK_STALE = "LINK_STALE"
LINK_SIGN_IN_REQUIRED = "LINK_SIGN_IN_REQUIRED"
LINK_WRONG_APPROVER = "LINK_WRONG_APPROVER"
LINK_CODES = {
    LINK_SIGN_IN_REQUIRED: "Single sign-on is required: sign in as the approver this link was "
    "sent to, then press the button again.",
    LINK_WRONG_APPROVER: "You are signed in as someone else than the approver this link was sent "
    "to; a link decides only for its own approver.",
    LINK_INVALID: "This link is not valid: it was mistyped, altered or never issued.",
    LINK_USED: "This link was already used; a link decides once.",
    LINK_EXPIRED: "This link has expired; open the run in the inbox or wait for a fresh link.",
    LINK_STALE: "The run changed since this link was sent (another decision was recorded); "
    "use the newer link or the inbox.",
}


@dataclass(frozen=True, slots=True)
class DirectoryEntry:
    """An approver who receives decision links: who they are, where, with which roles.

    ``webhook`` / ``slack``: the approver's own channel — a personal webhook URL their link is
    POSTed to alone, or a Slack user id it is sent to as a direct message. Without either, the
    link travels in the shared notification (``links.approvers``)."""

    approver_id: str
    tenant_id: str
    roles: tuple[str, ...]
    webhook: str | None = None
    slack: str | None = None

    @property
    def personal(self) -> bool:
        return self.webhook is not None or self.slack is not None


SHARED_LINK_RECEIVER = "SHARED_LINK_RECEIVER"
"""Start refused: several approvers' links of an action needing two or more approvals would reach
one receiver (one reader could fill every seat)."""


class SharedLinkReceiver(WebConfigError):
    code = SHARED_LINK_RECEIVER


def receivers(
    entry: DirectoryEntry, action_id: str, shared: Callable[[str], str | None]
) -> set[tuple[str, str]]:
    """Where ``entry``'s links for ``action_id`` go: its own channels, else the shared webhook."""
    found: set[tuple[str, str]] = set()
    if entry.webhook is not None:
        found.add(("webhook", entry.webhook))
    if entry.slack is not None:
        found.add(("slack", entry.slack))
    if not found:
        url = shared(action_id)
        if url is not None:
            found.add(("webhook", url))
    return found


def check_receivers(
    actions: Sequence[CompiledAction],
    directory: Mapping[str, DirectoryEntry],
    shared: Callable[[str], str | None],
    *,
    allowed: bool,
) -> list[str]:
    """Refuse (``SharedLinkReceiver``) a directory that sends several approvers' personal links
    for an action needing two or more approvals to one receiver, unless ``allowed``
    (``SIGNOFF_SHARED_LINK_RECEIVER=allow``); returns what was allowed, to log."""
    problems: list[str] = []
    for action in actions:
        spec = action.definition.approval
        most = max([spec.count, *(tier.count for tier in spec.escalate)])
        if most < 2:
            continue
        seats: dict[tuple[str, str, str], set[str]] = {}
        for entry in directory.values():
            if not set(entry.roles) & set(spec.approver_roles):
                continue
            for kind, where in receivers(entry, action.definition.id, shared):
                seats.setdefault((entry.tenant_id, kind, where), set()).add(entry.approver_id)
        for (tenant, kind, _where), who in sorted(seats.items()):
            if len(who) >= 2:
                problems.append(
                    f"{action.definition.id} needs up to {most} approvals, but the links of "
                    f"{', '.join(sorted(who))} (tenant {tenant}) go to one {kind} receiver"
                )
    if problems and not allowed:
        raise SharedLinkReceiver(
            "; ".join(problems) + ": give each approver their own channel in SIGNOFF_APPROVERS "
            '("webhook": URL or "slack": USER_ID), or set SIGNOFF_SHARED_LINK_RECEIVER=allow'
        )
    return problems


def parse_directory(text: str) -> dict[str, DirectoryEntry]:
    """``SIGNOFF_APPROVERS``: ``{"fin-lead": {"tenant": "acme", "roles": ["billing-lead"],
    "webhook": "https://hooks.example/fin-lead"}}`` (``webhook`` or ``slack``: optional, the
    approver's own channel)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise WebConfigError("SIGNOFF_APPROVERS is not JSON") from exc
    if not isinstance(raw, dict):
        raise WebConfigError("SIGNOFF_APPROVERS must be a JSON object keyed by approver id")
    entries: dict[str, DirectoryEntry] = {}
    for approver_id, entry in raw.items():
        roles = entry.get("roles") if isinstance(entry, dict) else None
        tenant = entry.get("tenant") if isinstance(entry, dict) else None
        if (
            not approver_id
            or not isinstance(tenant, str)
            or not tenant
            or not isinstance(roles, list)
            or not all(isinstance(r, str) and r for r in roles)
        ):
            raise WebConfigError(
                f"SIGNOFF_APPROVERS[{approver_id!r}] needs tenant and roles (a list of strings)"
            )
        webhook = entry.get("webhook")
        slack = entry.get("slack")
        if webhook is not None and (
            not isinstance(webhook, str) or not webhook.startswith(("http://", "https://"))
        ):
            raise WebConfigError(
                f"SIGNOFF_APPROVERS[{approver_id!r}].webhook must be an http(s) URL"
            )
        if slack is not None and (not isinstance(slack, str) or not slack.isalnum()):
            raise WebConfigError(
                f"SIGNOFF_APPROVERS[{approver_id!r}].slack must be a Slack user id"
            )
        unknown = set(entry) - {"tenant", "roles", "webhook", "slack"}
        if unknown:
            raise WebConfigError(
                f"SIGNOFF_APPROVERS[{approver_id!r}] has unknown fields: {', '.join(sorted(unknown))}"
            )
        entries[approver_id] = DirectoryEntry(
            approver_id, tenant, tuple(roles), webhook=webhook, slack=slack
        )
    return entries


def _version(text: str | None) -> int | None:
    """The run version a link page was rendered at (its hidden field), or ``None``."""
    if text is None or not text.isdigit() or len(text) > 18:
        return None
    return int(text) or None


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Checked:
    """A link that passed every check, with the run it decides."""

    link: ApprovalLink
    run: ActionRun
    approver: Principal


class DecisionLinks:
    def __init__(
        self,
        runtime: Runtime,
        store: LinkStore,
        templates: Environment,
        *,
        public_url: str,
        ttl: timedelta = DEFAULT_LINK_TTL,
        directory: Mapping[str, DirectoryEntry] | None = None,
    ) -> None:
        self.runtime = runtime
        self.store = store
        self.templates = templates
        self.public_url = public_url.rstrip("/")
        self.ttl = ttl
        self.directory = dict(directory or {})
        # With single sign-on configured, redeeming a link also needs the inbox session of the
        # link's own approver (``build_routes`` sets both).
        self.sessions: Sessions | None = None
        self.require_sign_in = False

    def routes(self) -> list[BaseRoute]:
        return [
            Route(PREFIX + "{token}", self.show, methods=["GET"]),
            Route(PREFIX + "{token}", self.decide, methods=["POST"]),
        ]

    # ----------------------------------------------------------------- issuing
    async def issue(
        self, run: ActionRun, approver: DirectoryEntry, *, expires_at: datetime | None = None
    ) -> str:
        """A fresh link for ``approver`` to decide ``run`` as it stands now; returns its URL."""
        return f"{self.public_url}{PREFIX}{await self._issue(run, approver, expires_at)}"

    async def _issue(
        self, run: ActionRun, approver: DirectoryEntry, expires_at: datetime | None
    ) -> str:
        """Store a link bound to ``run`` at its version; returns the token."""
        token = secrets.token_urlsafe(32)
        issued = now(self.runtime)
        await self.store.issue(
            ApprovalLink(
                token_hash=token_hash(token),
                run_id=run.run_id,
                run_version=run.version,
                tenant_id=run.tenant_id,
                approver_id=approver.approver_id,
                approver_roles=approver.roles,
                issued_at=issued,
                expires_at=expires_at or issued + self.ttl,
            )
        )
        return token

    async def links_for(self, run: ActionRun, *, personal: bool = False) -> list[dict[str, Any]]:
        """Links for every directory approver who could decide ``run`` now (none once decided):
        those without a channel of their own (the shared notification carries them), or with
        ``personal`` those with one (each goes to that approver alone, ``entry`` included)."""
        if run.status is not RunStatus.WAITING_APPROVAL:
            return []
        links: list[dict[str, Any]] = []
        for entry in self.directory.values():
            if entry.personal is not personal:
                continue
            who = Principal(id=entry.approver_id, roles=entry.roles)
            if entry.tenant_id != run.tenant_id or approver_refusal(run, who) is not None:
                continue
            links.append(
                {
                    "approver_id": entry.approver_id,
                    "url": await self.issue(run, entry),
                    "expires_in_seconds": int(self.ttl.total_seconds()),
                    **({"entry": entry} if personal else {}),
                }
            )
        return links

    # ---------------------------------------------------------------- checking
    async def _check(self, token: str, *, stale_ok: bool = False) -> _Checked | tuple[str, int]:
        """Every condition a link must meet, in order; a refusal is ``(code, status)``. With
        ``stale_ok`` a link whose run moved on passes (the caller shows the fresh view)."""
        if not _TOKEN.match(token):
            return LINK_INVALID, 404
        link = await self.store.get(token_hash(token))
        if link is None:
            return LINK_INVALID, 404
        if link.used_at is not None:
            return LINK_USED, 410
        if link.expires_at <= now(self.runtime):
            return LINK_EXPIRED, 410
        run = await self.runtime.get_run(link.run_id, link.tenant_id)
        if run is None:
            return LINK_INVALID, 404
        if run.status is not RunStatus.WAITING_APPROVAL:
            code = (
                Code.APPROVAL_EXPIRED
                if run.status is RunStatus.EXPIRED
                else Code.APPROVAL_NOT_PENDING
            )
            return code, 409
        if run.version != link.run_version and not stale_ok:
            return LINK_STALE, 409
        approver = Principal(id=link.approver_id, roles=link.approver_roles)
        refusal = approver_refusal(run, approver)
        if refusal is not None:
            return refusal, 403
        return _Checked(link, run, approver)

    # ------------------------------------------------------------------- pages
    async def show(self, request: Request) -> Response:
        checked = await self._check(request.path_params["token"])
        if not isinstance(checked, _Checked):
            return self._refused(*checked)
        who = self._signed_in_refusal(request, checked.link)
        return self._page(
            "link.html",
            run=self._view(checked.run),
            approver=checked.approver,
            expires_in=relative(checked.link.expires_at, now(self.runtime)),
            token=request.path_params["token"],
            sign_in=None
            if who is None
            else {"code": who[0], "text": LINK_CODES[who[0]], "next": request.url.path},
        )

    async def decide(self, request: Request) -> Response:
        token = request.path_params["token"]
        form = await read_form(request)
        vote = _VOTES.get(form.get("decision", "")) if form is not None else None
        reason = (form or {}).get("reason", "").strip()
        if vote is None or len(reason) > MAX_REASON:
            return self._page(
                "error.html",
                status=400,
                title="That decision could not be read",
                message=f"Choose Approve or Reject; a reason has at most {MAX_REASON} characters.",
            )
        checked = await self._check(token, stale_ok=True)
        if not isinstance(checked, _Checked):
            return self._refused(*checked)
        who = self._signed_in_refusal(request, checked.link)
        if who is not None:
            return self._refused(*who)
        shown = _version((form or {}).get("version"))
        if not await self.store.redeem(checked.link.token_hash, now(self.runtime)):
            return self._refused(LINK_USED, 410)  # a concurrent redeemer won
        if checked.run.version != checked.link.run_version or shown != checked.link.run_version:
            # The page was of another version than the run now: nothing is decided; the fresh
            # view comes with a fresh link bound to it (same approver, same expiry).
            return await self._fresh(checked, shown)
        result = await self.runtime.decide(
            checked.run.run_id,
            checked.link.tenant_id,
            DecisionRequest(
                approver=checked.approver,
                vote=vote,
                reason=reason,
                channel=Channel.UI,
                via="link",
                expected_version=checked.link.run_version,
            ),
        )
        if result.code == Code.APPROVAL_RUN_CHANGED:  # it moved on in between
            return await self._fresh(checked, shown)
        current = await self.runtime.get_run(checked.run.run_id, checked.link.tenant_id)
        return self._page(
            "link_done.html",
            status=200 if result.accepted else 409,
            accepted=result.accepted,
            code=result.code,
            text=describe(result.code),
            run=self._view(current) if current is not None else None,
        )

    async def _fresh(self, checked: _Checked, shown: int | None) -> Response:
        """The run as it stands now, with a notice that nothing was recorded and a fresh link
        (the spent one's approver and expiry) to decide on this view."""
        link = checked.link
        run = await self.runtime.get_run(link.run_id, link.tenant_id)
        if run is None:
            return self._refused(LINK_INVALID, 404)
        if run.status is not RunStatus.WAITING_APPROVAL:
            return self._refused(Code.APPROVAL_NOT_PENDING, 409)
        entry = DirectoryEntry(link.approver_id, link.tenant_id, link.approver_roles)
        token = await self._issue(run, entry, link.expires_at)
        return self._page(
            "link.html",
            status=409,
            run=self._view(run),
            approver=checked.approver,
            expires_in=relative(link.expires_at, now(self.runtime)),
            token=token,
            notice={
                "code": Code.APPROVAL_RUN_CHANGED,
                "shown": shown if shown is not None else "?",
                "current": run.version,
            },
        )

    def _signed_in_refusal(self, request: Request, link: ApprovalLink) -> tuple[str, int] | None:
        """With single sign-on: the request must carry the session of the link's own approver
        (same id, same tenant); otherwise why not."""
        if not self.require_sign_in:
            return None
        session = self.sessions.read(request) if self.sessions is not None else None
        caller = session.caller if session is not None else None
        if caller is None:
            return LINK_SIGN_IN_REQUIRED, 401
        if caller.principal.id != link.approver_id or caller.tenant_id != link.tenant_id:
            return LINK_WRONG_APPROVER, 403
        return None

    # ----------------------------------------------------------------- helpers
    def _view(self, run: ActionRun) -> dict[str, Any]:
        facts = action_facts(self.runtime, run)
        state = run.approval
        moment = now(self.runtime)
        return {
            "id": run.run_id,
            "action": run.action_id,
            "title": facts.title,
            "risk": facts.risk,
            "effect": facts.effect,
            "why": approval_reason(self.runtime, run) if state is not None else "",
            "principal": run.principal.id,
            "proposer_type": str(run.proposer_type),
            "resource": run.resource or "",
            "fields": input_fields(self.runtime, run),
            "preview": preview_fields(self.runtime, run),
            "preview_digest": run.preview.digest[:12] if run.preview is not None else "",
            "digest": short_digest(state.digest) if state else "",
            "age": relative(run.created_at, moment),
            "status": shown_status(run.status),
            "pending": run.status is RunStatus.WAITING_APPROVAL,
            "expires_in": relative(state.expires_at, moment)
            if state and state.expires_at
            else "never",
            "received": len(substance.standing_approvers(run)),
            "approvers": ", ".join(sorted(substance.standing_approvers(run))),
            "needed": state.count if state else 0,
            "still_needed": still_needed(run),
            "version": run.version,
            "amendments": amendment_views(self.runtime, run),
            "result": run.result,
        }

    def _refused(self, code: str, status: int) -> Response:
        message = LINK_CODES.get(code) or describe(code) or "This link cannot be used."
        return self._page(
            "error.html",
            status=status,
            title="This link cannot be used",
            message=f"{message} [{code}]",
        )

    def _page(self, template: str, *, status: int = 200, **context: Any) -> Response:
        html = self.templates.get_template(template).render(caller=None, csrf="", **context)
        return HTMLResponse(html, status_code=status, headers=LINK_HEADERS)


LINK_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # The token is in the path: never send it onwards, never keep it in a cache.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


__all__: Sequence[str] = ["DecisionLinks", "DirectoryEntry", "parse_directory"]
