"""Approval notifications over an HMAC-signed webhook.

A ``Notifier`` (core port): the runtime calls it fire-and-forget after the fact is committed, so
a slow, failing or unreachable receiver never blocks or loses a run — this class only logs.

Each POST carries a JSON body (``event``: ``approval.requested`` or ``approval.decided``; the run
with its input masked as on the approvers' screens; a link to it in the inbox) and the headers
``X-Signoff-Event``, ``X-Signoff-Delivery`` (unique per delivery, the same on retries) and
``X-Signoff-Signature: sha256=<hex HMAC-SHA256 of the raw body>``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime
from signoff.surfaces.web.config import WebhookConfig
from signoff.surfaces.web.links import DecisionLinks
from signoff.surfaces.web.run_json import run_json
from signoff.surfaces.web.signing import SIGNATURE_HEADER, signature

log = logging.getLogger("signoff.webhook")
EVENT_HEADER = "X-Signoff-Event"
DELIVERY_HEADER = "X-Signoff-Delivery"


class WebhookNotifier:
    def __init__(
        self,
        runtime: Runtime,
        config: WebhookConfig,
        *,
        public_url: str,
        client: Callable[[], httpx.AsyncClient] | None = None,
        links: DecisionLinks | None = None,
    ) -> None:
        self.runtime = runtime
        self.links = links
        self.config = config
        self.public_url = public_url.rstrip("/")
        self._client = client or (lambda: httpx.AsyncClient(timeout=config.timeout))

    async def approval_requested(self, run: ActionRun) -> None:
        await self.send("approval.requested", run)

    async def approval_decided(self, run: ActionRun, decision: str) -> None:
        await self.send("approval.decided", run, decision=decision)

    async def body(self, event: str, run: ActionRun, decision: str | None = None) -> dict[str, Any]:
        links: dict[str, Any] = {"inbox": f"{self.public_url}/approvals/runs/{run.run_id}"}
        if self.links is not None:
            # Personal one-time links for each directory approver who may decide it now.
            links["approvers"] = await self.links.links_for(run)
        return {
            "event": event,
            "decision": decision,
            "sent_at": self.runtime.now().isoformat().replace("+00:00", "Z"),
            "run": run_json(self.runtime, run, None),
            "links": links,
        }

    async def send(self, event: str, run: ActionRun, *, decision: str | None = None) -> bool:
        """Deliver one event; ``True`` when the receiver answered 2xx. Never raises."""
        url = self.config.url_for(run.action_id)
        if url is None:
            return False
        payload = json.dumps(
            await self.body(event, run, decision), separators=(",", ":"), ensure_ascii=False
        ).encode()
        headers = {
            "Content-Type": "application/json",
            EVENT_HEADER: event,
            DELIVERY_HEADER: str(uuid.uuid4()),
            SIGNATURE_HEADER: signature(self.config.secret, payload),
        }
        for attempt in range(1, self.config.attempts + 1):
            try:
                async with self._client() as client:
                    response = await client.post(url, content=payload, headers=headers)
                if response.is_success:
                    return True
                problem = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            log.warning(
                "webhook %s for run %s, attempt %d/%d failed: %s",
                event,
                run.run_id,
                attempt,
                self.config.attempts,
                problem,
            )
            if attempt < self.config.attempts and self.config.backoff > 0:
                await asyncio.sleep(self.config.backoff * attempt)
        return False
