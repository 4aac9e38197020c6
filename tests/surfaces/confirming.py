"""Shared pieces of the requester-confirmation tests: the actions and a host's human."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import mcp_types as types
from mcp.client.session import ClientRequestContext

from signoff.core.definition import (
    ActionDefinition,
    ApprovalSpec,
    ConfirmFallback,
    ConfirmSpec,
    DisplayFormat,
    FieldDisplay,
)
from tests.helpers import Recorder, definition

PAY = {"invoice_id": "INV-7", "amount": 1250, "idempotency_key": "pay-1"}
CONFIRM_FIELD = "signoff_confirm"


def confirm_definitions(recorder: Recorder, wait: timedelta = timedelta(seconds=30)) -> list[ActionDefinition]:  # fmt: skip
    """``invoice.pay`` (the requester confirms; refused where the host cannot ask),
    ``invoice.refund`` (confirm, else approvers) and ``invoice.void`` (confirm and four-eyes)."""
    confirm = ConfirmSpec(wait=wait)
    money = {"amount": FieldDisplay(format=DisplayFormat.MONEY, currency="EUR")}
    return [
        definition(
            recorder, id="invoice.pay", approval=ApprovalSpec(when="false", confirm=confirm),
            display=money, sensitive_fields=("invoice_id",),
        ),
        definition(
            recorder, id="invoice.refund",
            approval=ApprovalSpec(
                when="false", approver_roles=("billing-lead",),
                confirm=confirm.model_copy(update={"fallback": ConfirmFallback.APPROVERS}),
            ),
        ),
        definition(
            recorder, id="invoice.void",
            approval=ApprovalSpec(when="true", approver_roles=("billing-lead",), confirm=confirm),
        ),
    ]  # fmt: skip


@dataclass
class Human:
    """The person behind the host: answers ``action`` (``None``: never answers) and keeps
    every form it was shown."""

    action: Literal["accept", "decline", "cancel"] | None = "accept"
    shown: list[types.ElicitRequestFormParams] = field(default_factory=list)
    content: dict[str, Any] | None = None

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.shown.append(params)
        if self.action is None:
            await asyncio.Event().wait()  # the human walked away; the server's deadline ends it
        if self.action != "accept":
            return types.ElicitResult(action=self.action)
        content = self.content if self.content is not None else {CONFIRM_FIELD: True}
        return types.ElicitResult(action="accept", content=content)
