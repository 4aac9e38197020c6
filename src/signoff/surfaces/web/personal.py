"""Personal decision links delivered to each approver's own channel (``SIGNOFF_APPROVERS``):
a personal webhook (one signed POST per approver, ``approval.link``) or a Slack direct message.

A link decides for one approver; sent to a receiver others read, one reader could fill every seat
of a quorum. So links of approvers with a channel of their own never travel in the shared
notification, and a directory that would send several approvers' links of an action needing two
or more approvals to one receiver is refused at start (``links.check_receivers``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime
from signoff.surfaces.web.links import DecisionLinks, DirectoryEntry
from signoff.surfaces.web.run_json import run_json
from signoff.surfaces.web.signing import SIGNATURE_HEADER, signature
from signoff.surfaces.web.webhook import DELIVERY_HEADER, EVENT_HEADER

log = logging.getLogger("signoff.links")
LINK_EVENT = "approval.link"


class PersonalLinks:
    """A ``Notifier``: on every request and decision, a fresh link to each directory approver
    with a channel of their own who may decide the run now, through that channel alone."""

    def __init__(
        self,
        runtime: Runtime,
        links: Callable[[], DecisionLinks | None],
        *,
        secret: str | None,
        slack: Any | None = None,
        client: Callable[[], httpx.AsyncClient] | None = None,
    ) -> None:
        self.runtime = runtime
        self.links = links
        self.secret = secret
        self.slack = slack  # slack.messages.SlackApi (the slack extra), when configured
        self._client = client or (lambda: httpx.AsyncClient(timeout=5.0))

    async def approval_requested(self, run: ActionRun) -> None:
        await self.deliver(run)

    async def approval_decided(self, run: ActionRun, _decision: str) -> None:
        await self.deliver(run)

    async def deliver(self, run: ActionRun) -> int:
        """Send each personal link; how many were delivered. Never raises."""
        links = self.links()
        if links is None:
            return 0
        sent = 0
        for link in await links.links_for(run, personal=True):
            entry: DirectoryEntry = link.pop("entry")
            if entry.webhook is not None and await self._post(entry.webhook, run, link):
                sent += 1
            if entry.slack is not None and await self._dm(entry.slack, run, link):
                sent += 1
        return sent

    async def _post(self, url: str, run: ActionRun, link: dict[str, Any]) -> bool:
        if self.secret is None:
            return False
        payload = json.dumps(
            {
                "event": LINK_EVENT,
                "sent_at": self.runtime.now().isoformat().replace("+00:00", "Z"),
                "run": run_json(self.runtime, run, None),
                "link": link,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        headers = {
            "Content-Type": "application/json",
            EVENT_HEADER: LINK_EVENT,
            DELIVERY_HEADER: str(uuid.uuid4()),
            SIGNATURE_HEADER: signature(self.secret, payload),
        }
        try:
            async with self._client() as client:
                response = await client.post(url, content=payload, headers=headers)
        except httpx.HTTPError as exc:
            log.warning("personal link for run %s failed: %s", run.run_id, type(exc).__name__)
            return False
        if not response.is_success:
            log.warning("personal link for run %s: HTTP %d", run.run_id, response.status_code)
        return response.is_success

    async def _dm(self, user: str, run: ActionRun, link: dict[str, Any]) -> bool:
        if self.slack is None:
            return False
        answer = await self.slack.call(
            "chat.postMessage",
            {
                "channel": user,
                "text": f"Your decision link for {run.action_id} (run {run.run_id}), "
                f"valid {link['expires_in_seconds'] // 60} min: {link['url']}",
                "unfurl_links": False,
            },
        )
        return answer is not None
