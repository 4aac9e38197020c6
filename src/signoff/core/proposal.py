"""``ActionProposal``: what an adapter hands the pipeline — arguments plus trusted identity."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from signoff.core.identity import Channel, Principal, ProposerType


class ActionProposal(BaseModel):
    """A request for a side effect. Surfaces attach ``principal`` and ``tenant_id`` from trusted
    host context (a verified token, the server's launch configuration), never from arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    action_id: str = Field(max_length=255)
    input: Any = Field(default_factory=dict)
    principal: Principal
    tenant_id: str = Field(min_length=1, max_length=255)
    channel: Channel
    proposer_type: ProposerType
    idempotency_key: str | None = None


def canonical_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON form: key order and whitespace never change it."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()
