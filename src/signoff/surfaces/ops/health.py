"""``GET /healthz`` (the process answers), ``GET /readyz`` (it can govern calls) and ``GET /``.

Ready means: the store answers and its schema is at this build's head, the manifests loaded at
least one action, and the server is not shutting down. Not ready answers 503 with a JSON body
naming each failed check with a stable code (``STORE_UNREACHABLE``, ``STORE_TIMEOUT``,
``DATABASE_SCHEMA_OUT_OF_DATE``…, ``NO_ACTIONS_LOADED``, ``SHUTTING_DOWN``), so a load balancer
stops sending traffic; the endpoint is unauthenticated, so what the driver said (database names,
hosts) goes to the log (``signoff.health``), never into the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from signoff import __version__
from signoff.core.ports import Store
from signoff.store.health import DEFAULT_TIMEOUT, store_problem
from signoff.surfaces.draining import Draining

_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
)
_NO_STORE = {"Cache-Control": "no-store"}
SHUTTING_DOWN = "SHUTTING_DOWN"
NO_ACTIONS = "NO_ACTIONS_LOADED"
log = logging.getLogger("signoff.health")


@dataclass
class Health:
    """``actions``: how many actions are loaded now (they change on reload); ``links``: what the
    landing page lists besides the operator endpoints (path -> label)."""

    store: Store
    actions: Callable[[], int]
    draining: Draining | None = None
    timeout: float = DEFAULT_TIMEOUT
    links: dict[str, str] = field(default_factory=dict)

    _logged: str | None = field(default=None, init=False, repr=False)

    async def problems(self) -> dict[str, str]:
        """Failed checks by name, each a stable code; empty when ready. What the driver said
        goes to the log (once per change), never into the answer: ``/readyz`` is public."""
        failed: dict[str, str] = {}
        if self.draining is not None and self.draining.started:
            failed["shutdown"] = SHUTTING_DOWN
        store = await store_problem(self.store, timeout=self.timeout)
        if store is not None:
            failed["store"] = store.code
        if store is None or store.detail != self._logged:
            if store is not None:
                log.warning("not ready: the store: %s (%s)", store.code, store.detail)
            elif self._logged is not None:
                log.info("the store is ready again")
            self._logged = store.detail if store is not None else None
        if self.actions() == 0:
            failed["manifests"] = NO_ACTIONS
        return failed

    async def healthz(self, _request: Request) -> Response:
        return JSONResponse({"status": "ok"}, headers=_NO_STORE)

    async def readyz(self, _request: Request) -> Response:
        failed = await self.problems()
        checks: dict[str, Any] = {
            name: failed.get(name, "ok") for name in ("store", "manifests", "shutdown")
        }
        if failed:
            body = {"status": "not ready", "reasons": failed, "checks": checks}
            return JSONResponse(body, status_code=503, headers=_NO_STORE)
        return JSONResponse({"status": "ready", "checks": checks}, headers=_NO_STORE)

    async def landing(self, _request: Request) -> Response:
        html = _TEMPLATES.get_template("landing.html").render(
            version=__version__,
            actions=self.actions(),
            links=self.links,
        )
        return HTMLResponse(html)


def ops_routes(health: Health, *extra: BaseRoute) -> list[BaseRoute]:
    """``/healthz``, ``/readyz``, ``/`` and any ``extra`` (``/metrics``)."""
    return [
        Route("/healthz", health.healthz, methods=["GET"]),
        Route("/readyz", health.readyz, methods=["GET"]),
        Route("/", health.landing, methods=["GET"]),
        *extra,
    ]
