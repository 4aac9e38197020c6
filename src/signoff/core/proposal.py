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
    """SHA-256 of the canonical JSON form: key order, whitespace and the spelling of a number
    never change it (``10``, ``10.0`` and ``1e1`` are one value, contract §5)."""
    blob = json.dumps(
        _numbers_by_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _numbers_by_value(value: Any) -> Any:
    """An integral float becomes the integer it equals; booleans stay booleans."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _numbers_by_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_numbers_by_value(item) for item in value]
    return value
