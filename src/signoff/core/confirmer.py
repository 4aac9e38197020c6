"""The ``Confirmer`` port: how the core asks the requester's own human to confirm what will run.

The core never speaks MCP: a surface that can reach the requester's host (the MCP surface, with
the session's elicitation) hands the pipeline a ``Confirmer`` with the proposal. ``available``
says whether the host can be asked at all (it declared the elicitation capability); ``ask``
shows the request and returns the human's answer, or ``None`` when no answer came before
``request.wait`` (or the host will answer later, on another request): the run then waits,
durable, for the same principal to confirm it (``core/confirmation.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, Protocol

from signoff.core.definition import FieldDisplay


class ConfirmationAnswer(StrEnum):
    """What the human answered (the MCP elicitation actions)."""

    ACCEPT = "accept"
    DECLINE = "decline"
    CANCEL = "cancel"


@dataclass(frozen=True, slots=True)
class ConfirmationRequest:
    """Exactly what will run, as the requester is shown it: sensitive values already masked.
    ``digest`` is the digest of what will run (``substance.will_run``); the answer is bound to
    it."""

    run_id: str
    action_id: str
    title: str
    message: str
    values: dict[str, Any]
    digest: str
    wait: timedelta
    display: dict[str, FieldDisplay] = field(default_factory=dict)


class Confirmer(Protocol):
    """Asks the requester's human (implemented by a surface; never by the core)."""

    @property
    def available(self) -> bool:
        """The host declared it can be asked (MCP: the elicitation capability)."""
        ...

    async def ask(self, request: ConfirmationRequest) -> ConfirmationAnswer | None:
        """The human's answer, or ``None``: no answer now (the run waits as a pending
        confirmation)."""
        ...
