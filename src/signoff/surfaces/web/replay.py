"""``POST /api/policy/replay``: the replay report for operators (``docs/replay.md``).

The body carries the candidate manifests as texts — the server never reads a client's directory
— loaded by ``manifest.loader.load_manifest_texts`` (``signoff check``'s checks, nothing
imported, no environment read); a set that does not load answers 400 ``MANIFEST_INVALID`` with
every problem's file, line, column, field path and code. The replay reads the server's own
history, read-only, in the operator's tenant (the token's), and answers the report the CLI's
``--json`` prints: bounded (``runs`` per change, at most ``MAX_RUNS``, the rest counted in
``more``). Inputs are shown only for actions the server itself defines, masked with the server's
``sensitive`` fields as well as the candidate's.

Only an operator's token (scope ``signoff:operate``, not ``signoff:propose``) is served: no
token 401, an approver's or an agent's 403 ``INSUFFICIENT_SCOPE``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from signoff.core.codes import Code
from signoff.core.registry import ActionRegistry
from signoff.core.replay import History, ReplayReport, ReplayScope, replay
from signoff.manifest.durations import parse_duration
from signoff.manifest.errors import ManifestErrors
from signoff.manifest.loader import load_manifest_texts
from signoff.surfaces.access.scopes import ScopeRefusal
from signoff.surfaces.web.auth import Authenticator, Verified
from signoff.surfaces.web.http import (
    BodyTooLarge,
    answer,
    insufficient_scope,
    read_body,
    too_large,
    unauthenticated,
)

MAX_REPLAY_BODY = 1024 * 1024
"""The request body, manifests included (1 MiB)."""
MAX_FILES = 200
MAX_NAME_CHARS = 200
MAX_RUNS = 100
MAX_PROBLEMS = 100


@dataclass(frozen=True, slots=True)
class Replaying:
    """What the endpoint replays over: the server's current definitions (for masking) and a
    way to open its history read-only (``store.history.history_of``)."""

    registry: ActionRegistry
    history: Callable[[], Awaitable[History]]


class ReplayBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    manifests: dict[str, str] = Field(
        min_length=1,
        max_length=MAX_FILES,
        description="file name -> the YAML text of one manifest file (one or more documents)",
    )
    since: str | None = Field(default=None, max_length=32, description="e.g. 7d, 24h, 90m")
    from_: datetime | None = Field(default=None, alias="from")
    to: datetime | None = None
    action: str | None = Field(default=None, min_length=1, max_length=255)
    runs: int = Field(default=20, ge=0, le=MAX_RUNS)

    @field_validator("manifests")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or len(name) > MAX_NAME_CHARS or not name.isprintable():
                raise ValueError(f"a file name is 1-{MAX_NAME_CHARS} printable characters")
        return value

    @field_validator("from_", "to")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class ReplayApi:
    """The operators' replay endpoint over the server's ``history`` and current ``registry``."""

    def __init__(self, auth: Authenticator, replaying: Replaying) -> None:
        self.auth = auth
        self.registry = replaying.registry
        self.history = replaying.history

    def routes(self) -> list[BaseRoute]:
        return [Route("/api/policy/replay", self.replay, methods=["POST"])]

    async def replay(self, request: Request) -> Response:
        verified = await self.auth.from_request(request, operator=True)
        if not isinstance(verified, Verified):
            return _refused(verified)
        try:
            raw = await read_body(request, MAX_REPLAY_BODY)
        except BodyTooLarge:
            return too_large()
        try:
            body = ReplayBody.model_validate_json(raw or b"{}")
        except ValidationError as exc:
            return answer(Code.INPUT_VALIDATION_FAILED, _first_error(exc))
        scope = _scope(body, verified)
        if isinstance(scope, Response):
            return scope
        try:
            candidate = ActionRegistry(load_manifest_texts(body.manifests).compiled)
        except ManifestErrors as exc:
            problems = [
                {
                    "file": p.file,
                    "line": p.line,
                    "column": p.column,
                    "path": p.path,
                    "code": str(p.code),
                    "message": p.message,
                }
                for p in exc.problems[:MAX_PROBLEMS]
            ]
            return answer(
                Code.MANIFEST_INVALID,
                f"{len(exc.problems)} problem(s) in the manifests given.",
                problems=problems,
                more=max(0, len(exc.problems) - MAX_PROBLEMS),
            )
        report = await self._replay(candidate, scope, body.runs)
        return JSONResponse(
            {**_header(scope), **report.record()}, headers={"Cache-Control": "no-store"}
        )

    async def _replay(
        self, candidate: ActionRegistry, scope: ReplayScope, runs: int
    ) -> ReplayReport:
        current = {a.id: a.definition.sensitive_fields for a in self.registry.all()}
        report = ReplayReport(runs_per_change=runs, sensitive=current, inputs_of=current)
        history = await self.history()
        try:
            return await replay(history, candidate, scope, report)
        finally:
            await history.close()


def _scope(body: ReplayBody, verified: Verified) -> ReplayScope | Response:
    if body.since is not None and body.from_ is not None:
        return answer(Code.INPUT_VALIDATION_FAILED, "since: give since or from, not both.")
    start = body.from_
    if body.since is not None:
        length = parse_duration(body.since)
        if not length:
            return answer(Code.INPUT_VALIDATION_FAILED, "since: a duration such as 7d or 24h.")
        start = datetime.now(UTC) - length
    return ReplayScope(
        since=start, until=body.to, action_id=body.action, tenant_id=verified.caller.tenant_id
    )


def _header(scope: ReplayScope) -> dict[str, Any]:
    def at(moment: datetime | None) -> str | None:
        return moment.isoformat().replace("+00:00", "Z") if moment is not None else None

    return {
        "from": at(scope.since),
        "to": at(scope.until),
        "action": scope.action_id,
        "tenant": scope.tenant_id,
    }


def _refused(refusal: ScopeRefusal | None) -> Response:
    return unauthenticated() if refusal is None else insufficient_scope(refusal)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ())) or "body"
    return f"{where}: {error.get('msg', 'invalid')}"
