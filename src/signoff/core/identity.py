"""Who asked, from where, on whose authority — kept as separate fields, never one "actor"."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

IDEMPOTENCY_KEY_PATTERN = re.compile(r"^[\x20-\x7e]{1,255}$")


class Channel(StrEnum):
    """Where a request entered signoff (set by the adapter, never by the caller)."""

    MCP = "mcp"
    API = "api"
    CLI = "cli"
    UI = "ui"
    SLACK = "slack"
    SCHEDULER = "scheduler"
    INTERNAL = "internal"
    RECOVERY = "recovery"
    ELICITATION = "elicitation"
    """A requester's confirmation answered in the agent's host (never a proposal's channel)."""


class ProposerType(StrEnum):
    """Who proposed the action. MCP tool calls are always ``agent``."""

    AGENT = "agent"
    HUMAN = "human"
    SYSTEM = "system"
    SERVICE = "service"


class Principal(BaseModel):
    """The authenticated subject whose authority is evaluated.

    Comes from trusted host context (a verified token or the server's launch configuration),
    never from tool arguments.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=255)
    roles: tuple[str, ...] = ()

    @field_validator("roles", mode="before")
    @classmethod
    def _sorted_unique(cls, value: object) -> object:
        if isinstance(value, list | tuple | set | frozenset):
            return tuple(sorted({str(role) for role in value}))
        return value

    def has_any_role(self, roles: tuple[str, ...] | list[str]) -> bool:
        return any(role in self.roles for role in roles)


def is_valid_idempotency_key(key: str) -> bool:
    """1-255 printable ASCII characters (contract §1)."""
    return IDEMPOTENCY_KEY_PATTERN.fullmatch(key) is not None
