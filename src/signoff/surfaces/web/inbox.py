"""The approvers' web inbox at ``/approvals``: server-rendered, no JavaScript needed.

Sign-in turns a pasted bearer token into a signed session cookie (``session.py``); every POST
checks the session's CSRF token; each decision goes through ``Runtime.decide`` with channel ``ui``,
then redirects (POST/redirect/GET) to the run with the decision's code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.core.approvals import DecisionRequest
from signoff.core.codes import Code
from signoff.core.identity import Channel
from signoff.core.run import MAX_REASON_CHARS, ActionRun, ApprovalVote
from signoff.core.runtime import Runtime
from signoff.core.visibility import ReaderKind
from signoff.surfaces.access.scopes import ScopeRefusal
from signoff.surfaces.web.api import APPROVAL_VERSION_REQUIRED, receipt_answer
from signoff.surfaces.web.auth import Authenticator
from signoff.surfaces.web.http import STATUS_OF, read_form
from signoff.surfaces.web.receipts import Receipts
from signoff.surfaces.web.rows import inbox_row, recorded_banner
from signoff.surfaces.web.session import Session, Sessions, csrf_matches
from signoff.surfaces.web.sso import SsoRefused
from signoff.surfaces.web.views import (
    coerce_amendments,
    describe,
    pending_page,
    row_matches,
    visible,
)

PREFIX = "/approvals"
SIGN_IN = PREFIX + "/sign-in"
INBOX_PAGE = 100
_CSS = (Path(__file__).parent / "static" / "inbox.css").read_text(encoding="utf-8")
_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_VOTES = {"approve": ApprovalVote.APPROVE, "reject": ApprovalVote.REJECT}


_PAST = {"approve": "approved", "reject": "rejected"}


def page_templates() -> Environment:
    """The HTML templates of the web surface (autoescaped)."""
    environment = Environment(
        loader=PackageLoader("signoff.surfaces.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["past"] = lambda vote: _PAST.get(str(vote), str(vote))
    # Free text a proposer, an executor or another approver chose is shown with its hidden
    # characters visible, like the input fields.
    environment.filters["visible"] = lambda text: visible(str(text))[0]
    return environment


class Inbox:
    def __init__(
        self,
        runtime: Runtime,
        auth: Authenticator,
        sessions: Sessions,
        *,
        sso: bool = False,
        receipts: Receipts | None = None,
    ) -> None:
        self.runtime = runtime
        self.receipts = receipts
        self.auth = auth
        self.sessions = sessions
        self.sso = sso
        self.templates = page_templates()

    def routes(self) -> list[BaseRoute]:
        return [
            Route(PREFIX, self.index, methods=["GET"]),
            Route(SIGN_IN, self.sign_in_form, methods=["GET"]),
            Route(SIGN_IN, self.sign_in, methods=["POST"]),
            Route(PREFIX + "/sign-out", self.sign_out, methods=["POST"]),
            Route(PREFIX + "/runs/{run_id}", self.detail, methods=["GET"]),
            Route(PREFIX + "/runs/{run_id}/decide", self.decide, methods=["POST"]),
            Route(PREFIX + "/runs/{run_id}/receipt", self.receipt, methods=["GET"]),
            Route(PREFIX + "/static/inbox.css", self.css, methods=["GET"]),
        ]

    # ---------------------------------------------------------------- sign-in
    async def sign_in_form(self, request: Request) -> Response:
        session = self.sessions.read(request)
        if session is not None and session.signed_in:
            return _see_other(safe_next(request.query_params.get("next")))
        fresh = session or self.sessions.anonymous()
        return self.render(
            request,
            "sign_in.html",
            fresh,
            next=safe_next(request.query_params.get("next")),
            signed_out="signed_out" in request.query_params,
            set_cookie=session is None,
            sso=self.sso,
        )

    async def sign_in(self, request: Request) -> Response:
        form = await _form(request)
        session = self.sessions.read(request)
        if form is None or not csrf_matches(session, form.get("csrf")):
            return self.forbidden(request)
        assert session is not None
        next_url = safe_next(form.get("next"))
        verified = await self.auth.verify(form.get("token", ""))
        if isinstance(verified, ScopeRefusal):
            return self.render(
                request,
                "sign_in.html",
                session,
                status=403,
                next=next_url,
                error=f"{verified.description} [{Code.INSUFFICIENT_SCOPE}]",
            )
        if verified is None:
            return self.render(
                request,
                "sign_in.html",
                session,
                status=401,
                next=next_url,
                error="That token is not valid, has expired, or does not name a tenant.",
            )
        signed_in = self.sessions.signed_in(verified.caller, verified.expires_at)
        response = _see_other(next_url)
        self.sessions.attach(response, signed_in, request)
        return response

    async def sign_out(self, request: Request) -> Response:
        form = await _form(request)
        session = self.sessions.read(request)
        if form is None or not csrf_matches(session, form.get("csrf")):
            return self.forbidden(request)
        assert session is not None
        self.sessions.revoke(session)
        response = _see_other(SIGN_IN + "?signed_out=1")
        self.sessions.clear(response, request)
        return response

    # ------------------------------------------------------------------ pages
    async def index(self, request: Request) -> Response:
        session = self.sessions.read(request)
        if session is None or session.caller is None:
            return _to_sign_in(PREFIX)
        now = self.runtime.now()
        after = request.query_params.get("after") or None
        if after is not None and (len(after) > 64 or not after.isprintable()):
            after = None
        page = await pending_page(
            self.runtime, session.caller.tenant_id, session.caller, INBOX_PAGE, after
        )
        rows = [inbox_row(self.runtime, run, now, session.caller) for run in page.runs]
        action = request.query_params.get("action", "")[:255]
        query = request.query_params.get("q", "").strip()[:100]
        next_url = f"{PREFIX}?after={quote(page.next_after, safe='')}" if page.next_after else None
        return self.render(
            request,
            "inbox.html",
            session,
            rows=rows,
            shown=[row for row in rows if row_matches(row, action, query)],
            actions=sorted({row["action"] for row in rows}),
            chosen_action=action,
            query=query,
            next_url=next_url,
            paged=after is not None,
        )

    async def detail(self, request: Request) -> Response:
        session = self.sessions.read(request)
        run_id = request.path_params["run_id"]
        if session is None or session.caller is None:
            return _to_sign_in(f"{PREFIX}/runs/{quote(run_id, safe='')}")
        run = await self.runtime.get_run(
            run_id, session.caller.tenant_id, reader=session.caller.reader(ReaderKind.APPROVER)
        )
        if run is None:
            return self.not_found(request, session)
        # The banner comes from the stored decision, never from the URL: ``?decided=1`` only
        # asks to show this approver's own recorded decision, if there is one.
        banner = None
        if "decided" in request.query_params:
            banner = recorded_banner(run, session.caller.principal.id)
        row = inbox_row(self.runtime, run, self.runtime.now(), session.caller)
        return self.render(request, "run.html", session, run=row, banner=banner)

    async def receipt(self, request: Request) -> Response:
        """The run's receipt as a download (the run page links it once the run finished)."""
        session = self.sessions.read(request)
        run_id = request.path_params["run_id"]
        if session is None or session.caller is None:
            return _to_sign_in(f"{PREFIX}/runs/{quote(run_id, safe='')}")
        run = await self.runtime.get_run(
            run_id, session.caller.tenant_id, reader=session.caller.reader(ReaderKind.APPROVER)
        )
        if run is None:
            return self.not_found(request, session)
        made = await receipt_answer(self.runtime, self.receipts, run)
        if made.status_code == 200:
            return made
        code = json.loads(bytes(made.body)).get("code", "")
        if code == Code.ACTION_RUN_NOT_FOUND:
            return self.not_found(request, session)
        return self.render(
            request,
            "error.html",
            session,
            status=made.status_code,
            title="No receipt for this run yet",
            message=f"{describe(code)} [{code}]",
        )

    async def decide(self, request: Request) -> Response:
        session = self.sessions.read(request)
        run_id = request.path_params["run_id"]
        form = await _form(request)
        if form is None or not csrf_matches(session, form.get("csrf")):
            return self.forbidden(request)
        assert session is not None
        if session.caller is None:
            return _to_sign_in(f"{PREFIX}/runs/{quote(run_id, safe='')}")
        vote = _VOTES.get(form.get("decision", ""))
        reason = form.get("reason", "").strip()
        if vote is None or len(reason) > MAX_REASON_CHARS:
            return self.render(
                request,
                "error.html",
                session,
                status=400,
                title="That decision could not be read",
                message=f"Choose Approve or Reject; a reason has at most {MAX_REASON_CHARS} characters.",
            )
        reader = session.caller.reader(ReaderKind.APPROVER)
        shown = _version(form.get("version"))
        if shown is None:
            # A form without the version it was rendered at (an old page): show the run as it
            # is now and let the approver decide on that.
            run = await self.runtime.get_run(run_id, session.caller.tenant_id, reader=reader)
            if run is None:
                return self.not_found(request, session)
            return self._changed(request, session, run, APPROVAL_VERSION_REQUIRED, None, 400)
        amendments: dict[str, Any] | None = None
        if vote is ApprovalVote.APPROVE:
            shown_run = await self.runtime.get_run(run_id, session.caller.tenant_id)
            if shown_run is not None:
                amendments = coerce_amendments(self.runtime, shown_run, form) or None
        result = await self.runtime.decide(
            run_id,
            session.caller.tenant_id,
            DecisionRequest(
                approver=session.caller.principal,
                vote=vote,
                reason=reason,
                channel=Channel.UI,
                via="web-inbox",
                amendments=amendments,
                expected_version=shown,
            ),
            reader=session.caller.reader(ReaderKind.APPROVER),
        )
        if result.code == Code.ACTION_RUN_NOT_FOUND:
            return self.not_found(request, session)
        if result.accepted:
            return _see_other(f"{PREFIX}/runs/{quote(run_id, safe='')}?decided=1")
        # Refused: nothing was stored, so say so on this answer (no redirect to carry it).
        run = await self.runtime.get_run(
            run_id, session.caller.tenant_id, reader=session.caller.reader(ReaderKind.APPROVER)
        )
        if run is None:
            return self.not_found(request, session)
        if result.code == Code.APPROVAL_RUN_CHANGED:
            return self._changed(request, session, run, result.code, shown, 409)
        banner = {"code": result.code, "text": describe(result.code), "ok": False}
        row = inbox_row(self.runtime, run, self.runtime.now(), session.caller)
        status = STATUS_OF.get(result.code, 409)
        return self.render(request, "run.html", session, status=status, run=row, banner=banner)

    def _changed(
        self,
        request: Request,
        session: Session,
        run: ActionRun,
        code: str,
        shown: int | None,
        status: int,
    ) -> Response:
        """The run page again, fresh, with a notice: nothing was recorded, decide again."""
        assert session.caller is not None
        row = inbox_row(self.runtime, run, self.runtime.now(), session.caller)
        notice = {
            "code": code,
            "shown": shown if shown is not None else "?",
            "current": run.version,
        }
        return self.render(request, "run.html", session, status=status, run=row, notice=notice)

    async def css(self, _request: Request) -> Response:
        return Response(
            _CSS, media_type="text/css", headers={"Cache-Control": "public, max-age=3600"}
        )

    # ---------------------------------------------------------------- helpers
    def render(
        self,
        request: Request,
        template: str,
        session: Session,
        *,
        status: int = 200,
        set_cookie: bool = False,
        **context: Any,
    ) -> Response:
        html = self.templates.get_template(template).render(
            caller=session.caller, csrf=session.csrf, **context
        )
        response = HTMLResponse(html, status_code=status, headers=_SECURITY_HEADERS)
        if set_cookie:
            self.sessions.attach(response, session, request)
        return response

    def sso_refused(self, request: Request, refusal: SsoRefused) -> Response:
        """The page for a single sign-on that could not complete: what happened, with its code."""
        fresh = self.sessions.read(request) or self.sessions.anonymous()
        return self.render(
            request,
            "error.html",
            fresh,
            status=refusal.status,
            set_cookie=True,
            title="You are not signed in",
            message=f"{refusal} [{refusal.code}]",
            back=SIGN_IN,
        )

    def fallback(self) -> BaseRoute:
        """Any other path under ``/approvals``: a styled page, never a bare "Not Found"."""
        return Route(PREFIX + "/{rest:path}", self.missing, methods=["GET", "POST", "HEAD"])

    async def missing(self, request: Request) -> Response:
        session = self.sessions.read(request) or self.sessions.anonymous()
        return self.render(
            request,
            "error.html",
            session,
            status=404,
            title="There is no such page",
            message="Nothing lives at this address. [NOT_FOUND]",
        )

    def forbidden(self, request: Request) -> Response:
        """A POST without a valid CSRF token (or session): nothing happened."""
        fresh = self.sessions.read(request) or self.sessions.anonymous()
        return self.render(
            request,
            "error.html",
            fresh,
            status=403,
            set_cookie=True,
            title="This form has expired",
            message="Nothing was changed. Go back, reload the page and try again.",
        )

    def not_found(self, request: Request, session: Session) -> Response:
        return self.render(
            request,
            "error.html",
            session,
            status=404,
            title="No such run",
            message=f"There is no such run in your tenant. [{Code.ACTION_RUN_NOT_FOUND}]",
        )


def _version(text: str | None) -> int | None:
    """The run version a form was rendered at (a hidden field), or ``None``."""
    if text is None or not text.isdigit() or len(text) > 18:
        return None
    return int(text) or None


async def _form(request: Request) -> dict[str, str] | None:
    return await read_form(request)


def safe_next(value: str | None) -> str:
    """Only a path inside the inbox: never another host (no open redirect)."""
    if value and value.startswith(PREFIX) and "//" not in value and "\\" not in value:
        return value
    return PREFIX


def _see_other(url: str) -> Response:
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


def _to_sign_in(next_url: str) -> Response:
    return _see_other(f"{SIGN_IN}?next={quote(next_url, safe='')}")
