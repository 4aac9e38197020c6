"""What signoff posts to Slack (Block Kit) and the notifier that posts and updates it."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import httpx
from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    HeaderBlock,
    SectionBlock,
)
from slack_sdk.models.blocks.basic_components import MarkdownTextObject

from signoff.core import substance
from signoff.core.decisions import still_needed
from signoff.core.run import ActionRun, ApprovalVote, RunStatus
from signoff.core.runtime import Runtime
from signoff.surfaces.web.slack.config import SlackConfig
from signoff.surfaces.web.views import (
    action_facts,
    amendment_views,
    approval_reason,
    input_fields,
    now,
    preview_fields,
    relative,
)

log = logging.getLogger("signoff.slack")

APPROVE_ACTION = "signoff_approve"
REJECT_ACTION = "signoff_reject"
VERSION_MARK = "@"
"""A button's value is ``RUN_ID@VERSION``: the decision is bound to the version the message showed."""


def button_value(run: ActionRun) -> str:
    return f"{run.run_id}{VERSION_MARK}{run.version}"


_REMEMBERED_MESSAGES = 10_000


def escape(text: str) -> str:
    """Slack's markup escapes: an agent's text can never become a mention or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackApi:
    """The few Web API methods signoff calls, over httpx, only ever at ``config.api_url``."""

    def __init__(
        self, config: SlackConfig, client: Callable[[], httpx.AsyncClient] | None = None
    ) -> None:
        self.config = config
        self._client = client or (lambda: httpx.AsyncClient(timeout=config.timeout))

    async def call(self, method: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The method's JSON answer when Slack says ``ok``; ``None`` (logged) otherwise."""
        url = f"{self.config.api_url.rstrip('/')}/{method}"
        headers = {"Authorization": f"Bearer {self.config.bot_token}"}
        try:
            async with self._client() as client:
                response = await client.post(url, json=body, headers=headers)
            answer = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("slack %s failed: %s", method, type(exc).__name__)
            return None
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            error = answer.get("error") if isinstance(answer, dict) else None
            log.warning("slack %s refused: %s", method, error or f"HTTP {response.status_code}")
            return None
        return answer


class SlackNotifier:
    """Posts approval requests and keeps each message up to date with the run's outcome."""

    def __init__(self, runtime: Runtime, api: SlackApi, *, public_url: str) -> None:
        self.runtime = runtime
        self.api = api
        self.public_url = public_url.rstrip("/")
        self._messages: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def remember(self, run_id: str, channel: str, ts: str) -> None:
        """Where the run's message is (also learnt from interactions after a restart)."""
        self._messages[run_id] = (channel, ts)
        self._messages.move_to_end(run_id)
        while len(self._messages) > _REMEMBERED_MESSAGES:
            self._messages.popitem(last=False)

    async def approval_requested(self, run: ActionRun) -> None:
        blocks = request_blocks(self.runtime, run, self.public_url)
        answer = await self.api.call(
            "chat.postMessage",
            {
                "channel": self.api.config.channel,
                "text": f"Approval needed: {run.action_id}",
                "blocks": blocks,
                "unfurl_links": False,
            },
        )
        if answer is not None and isinstance(answer.get("ts"), str):
            self.remember(
                run.run_id, str(answer.get("channel") or self.api.config.channel), answer["ts"]
            )

    async def refresh(self, run: ActionRun) -> None:
        """Show the run's message as the run stands now (a press on a stale view)."""
        await self.approval_decided(run, "updated")

    async def approval_decided(self, run: ActionRun, decision: str) -> None:
        where = self._messages.get(run.run_id)
        blocks = decided_blocks(self.runtime, run, decision, self.public_url)
        text = f"{run.action_id}: {decision}"
        if where is None:
            await self.api.call(
                "chat.postMessage",
                {"channel": self.api.config.channel, "text": text, "blocks": blocks},
            )
            return
        channel, ts = where
        await self.api.call(
            "chat.update", {"channel": channel, "ts": ts, "text": text, "blocks": blocks}
        )


def _summary_blocks(runtime: Runtime, run: ActionRun) -> list[Block]:
    facts = action_facts(runtime, run)
    title = facts.title
    fields = [
        MarkdownTextObject(
            text=f"*Proposed by*\n{escape(str(run.proposer_type))} `{escape(run.principal.id)}`"
        ),
        MarkdownTextObject(text=f"*Risk*\n{escape(facts.risk)}"),
    ]
    if run.resource:
        fields.append(MarkdownTextObject(text=f"*Resource*\n`{escape(run.resource)}`"))
    state = run.approval
    if state is not None and state.expires_at is not None:
        fields.append(
            MarkdownTextObject(text=f"*Expires*\n{relative(state.expires_at, now(runtime))}")
        )
    lines = [
        f"*{escape(f.name)}*: {'(hidden)' if f.masked else escape(f.value)[:200]}"
        for f in input_fields(runtime, run)[:10]
    ]
    blocks: list[Block] = [
        HeaderBlock(text=f"Approval needed: {title}"[:150]),
        SectionBlock(
            text=MarkdownTextObject(text=f"*Why:* {escape(approval_reason(runtime, run))}"),
            fields=fields[:10],
        ),
    ]
    amendments = amendment_views(runtime, run)
    if lines:
        heading = "*Will run (amended):*\n" if amendments else ""
        blocks.append(
            SectionBlock(text=MarkdownTextObject(text=(heading + "\n".join(lines))[:2900]))
        )
    if amendments:
        changed = [
            f"• `{escape(a.approver_id)}` changed {escape(a.summary)}"[:400] for a in amendments
        ]
        blocks.append(
            SectionBlock(
                text=MarkdownTextObject(text=("*Amendments:*\n" + "\n".join(changed))[:2900])
            )
        )
    if state is not None and run.status is RunStatus.WAITING_APPROVAL:
        received = len(substance.standing_approvers(run))
        left = still_needed(run)
        blocks.append(
            ContextBlock(
                elements=[
                    MarkdownTextObject(
                        text=f"Approvals: {received} of {state.count}"
                        + (f", {left} more needed" if left else "")
                        + f" · version {run.version}"
                    )
                ]
            )
        )
    preview = [
        f"*{escape(f.name)}*: {escape(f.value)[:200]}" for f in preview_fields(runtime, run)[:10]
    ]
    if preview:
        blocks.append(
            SectionBlock(text=MarkdownTextObject(text=("*Preview:*\n" + "\n".join(preview))[:2900]))
        )
    return blocks


def _buttons(run: ActionRun, public_url: str) -> ActionsBlock:
    """Approve / Reject bound to the run's version, and Open in inbox."""
    return ActionsBlock(
        block_id=f"signoff:{run.run_id}",
        elements=[
            ButtonElement(
                text="Approve",
                action_id=APPROVE_ACTION,
                value=button_value(run),
                style="primary",
            ),
            ButtonElement(
                text="Reject", action_id=REJECT_ACTION, value=button_value(run), style="danger"
            ),
            ButtonElement(
                text="Open in inbox",
                action_id="signoff_open",
                url=f"{public_url}/approvals/runs/{run.run_id}",
            ),
        ],
    )


def request_blocks(runtime: Runtime, run: ActionRun, public_url: str) -> list[dict[str, Any]]:
    """The approval request: the summary, then Approve / Reject / Open in inbox."""
    blocks = _summary_blocks(runtime, run)
    blocks.append(_buttons(run, public_url))
    blocks.append(ContextBlock(elements=[MarkdownTextObject(text=f"run `{run.run_id}`")]))
    return [block.to_dict() for block in blocks]


def decided_blocks(
    runtime: Runtime, run: ActionRun, decision: str, public_url: str
) -> list[dict[str, Any]]:
    """The summary as the run now stands (what will run, the amendments, the approvals still
    needed), who decided what, and — while it still waits for approvals — fresh buttons bound to
    the run's new version (a press on the old ones is refused ``APPROVAL_RUN_CHANGED``)."""
    blocks = _summary_blocks(runtime, run)
    state = run.approval
    standing = substance.standing(run)
    who = ", ".join(
        f"{escape(d.approver_id)} {'approved' if d.decision is ApprovalVote.APPROVE else 'rejected'}"
        + ("" if d in standing else " (before an amendment: no longer counts)")
        for d in (state.decisions if state is not None else ())
    )
    status = (
        "waiting for more approvals"
        if run.status is RunStatus.WAITING_APPROVAL
        else str(run.status)
    )
    result = f" ({escape(run.result.code)})" if run.result is not None else ""
    blocks.append(
        SectionBlock(
            text=MarkdownTextObject(
                text=f"*{escape(decision.capitalize())}* — {who or 'no decisions'}; run is {status}{result}."
            )
        )
    )
    if still_needed(run):
        blocks.append(_buttons(run, public_url))
    blocks.append(
        ContextBlock(
            elements=[
                MarkdownTextObject(
                    text=f"run `{run.run_id}` · <{public_url}/approvals/runs/{run.run_id}|inbox>"
                )
            ]
        )
    )
    return [block.to_dict() for block in blocks]
