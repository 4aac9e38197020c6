"""Rows to values and back. Runs and results travel as the pydantic JSON of the core models."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic_core import from_json, to_json

from signoff.core.chain import round_heads
from signoff.core.ports import (
    AuditEvent,
    ChainHead,
    Checkpoint,
    CheckpointRound,
    DuplicateEntry,
    DuplicateState,
)
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun, DuplicateScope


def scope_hash(scope: DuplicateScope) -> str:
    """The duplicate table's key: SHA-256 of the four scope parts, unambiguous in any content."""
    return _scope_hash(scope.tenant_id, scope.action_id, scope.idempotency_key, scope.visibility)


@functools.lru_cache(maxsize=256)  # a run reserves its scope and completes it a moment later
def _scope_hash(tenant_id: str, action_id: str, key: str, visibility: str) -> str:
    blob = json.dumps(
        [tenant_id, action_id, key, visibility], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def run_values(run: ActionRun) -> dict[str, Any]:
    """Every column of a run row."""
    return {
        "run_id": run.run_id,
        "tenant_id": run.tenant_id,
        "action_id": run.action_id,
        "status": str(run.status),
        "version": run.version,
        "principal_id": run.principal.id,
        "idempotency_key": run.idempotency_key,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "data": run.model_dump_json(),
    }


def run_from_data(data: str) -> ActionRun:
    return ActionRun.model_validate_json(data)


def duplicate_values(
    scope: DuplicateScope, owner_run_id: str, input_hash: str, now: datetime
) -> dict[str, Any]:
    """The row of a fresh RUNNING reservation."""
    return {
        "scope_hash": scope_hash(scope),
        "tenant_id": scope.tenant_id,
        "action_id": scope.action_id,
        "idempotency_key": scope.idempotency_key,
        "visibility": scope.visibility,
        "owner_run_id": owner_run_id,
        "state": DuplicateState.RUNNING.value,
        "input_hash": input_hash,
        "result": None,
        "created_at": now,
        "completed_at": None,
    }


def duplicate_from_row(row: Mapping[Any, Any]) -> DuplicateEntry:
    result = row["result"]
    return DuplicateEntry(
        scope=DuplicateScope(
            tenant_id=row["tenant_id"],
            action_id=row["action_id"],
            idempotency_key=row["idempotency_key"],
            visibility=row["visibility"],
        ),
        owner_run_id=row["owner_run_id"],
        state=DuplicateState(row["state"]),
        input_hash=row["input_hash"],
        result=ExecutionResult.model_validate_json(result) if result is not None else None,
        created_at=row["created_at"],
        completed_at=row["completed_at"],
    )


def result_json(result: ExecutionResult) -> str:
    return result.model_dump_json()


def audit_values(event: AuditEvent) -> dict[str, Any]:
    """An audit row; ``seq`` is assigned by the database. A chained event's ``data`` is already
    plain JSON (``chain.link``), so what is stored is what was hashed."""
    return {
        "run_id": event.run_id,
        "tenant_id": event.tenant_id,
        "kind": event.kind,
        "at": event.at,
        "actor": event.actor,
        "status": event.status,
        "code": event.code,
        # Lenient on purpose: an odd value in an audit detail must not fail the unit of work.
        "data": to_json(event.data, serialize_unknown=True).decode()
        if event.data is not None
        else None,
        "chain_seq": event.chain_seq,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


def audit_from_row(row: Mapping[Any, Any]) -> AuditEvent:
    data = row["data"]
    return AuditEvent(
        run_id=row["run_id"],
        tenant_id=row["tenant_id"],
        kind=row["kind"],
        at=row["at"],
        actor=row["actor"],
        status=row["status"],
        code=row["code"],
        data=from_json(data) if data is not None else None,
        seq=row["seq"],
        chain_seq=row["chain_seq"],
        prev_hash=row["prev_hash"],
        hash=row["hash"],
    )


def checkpoint_values(checkpoint: Checkpoint) -> dict[str, Any]:
    return {
        "tenant_id": checkpoint.tenant_id,
        "chain_seq": checkpoint.chain_seq,
        "head_hash": checkpoint.head_hash,
        "at": checkpoint.at,
        "key_id": checkpoint.key_id,
        "algorithm": checkpoint.algorithm,
        "signature": checkpoint.signature,
        "round": checkpoint.round,
    }


def checkpoint_from_row(row: Mapping[Any, Any]) -> Checkpoint:
    return Checkpoint(
        tenant_id=row["tenant_id"],
        chain_seq=row["chain_seq"],
        head_hash=row["head_hash"],
        at=row["at"],
        key_id=row["key_id"],
        algorithm=row["algorithm"],
        signature=row["signature"],
        id=row["id"],
        round=row["round"],
    )


def round_values(checkpoint_round: CheckpointRound) -> dict[str, Any]:
    return {
        "round": checkpoint_round.round,
        "prev_hash": checkpoint_round.prev_hash,
        "hash": checkpoint_round.hash,
        "heads": json.dumps(
            round_heads(checkpoint_round.heads), ensure_ascii=False, separators=(",", ":")
        ),
        "at": checkpoint_round.at,
        "key_id": checkpoint_round.key_id,
        "algorithm": checkpoint_round.algorithm,
        "signature": checkpoint_round.signature,
    }


def round_from_row(row: Mapping[Any, Any], heads: tuple[ChainHead, ...]) -> CheckpointRound:
    return CheckpointRound(
        round=int(row["round"]),
        prev_hash=row["prev_hash"],
        heads=heads,
        at=row["at"],
        key_id=row["key_id"],
        algorithm=row["algorithm"],
        signature=row["signature"],
        hash=row["hash"],
    )


def round_heads_from_json(text: str) -> tuple[ChainHead, ...]:
    """A stored listing back as heads sorted by tenant; ``ValueError`` if it is not one."""
    value = from_json(text)
    if not isinstance(value, dict):
        raise ValueError("a round's heads must be a JSON object")
    heads: list[ChainHead] = []
    for tenant_id, head in value.items():
        if not isinstance(head, dict) or set(head) != {"chain_seq", "head_hash"}:
            raise ValueError(f"round head of {tenant_id!r} is not {{chain_seq, head_hash}}")
        seq, digest = head["chain_seq"], head["head_hash"]
        if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(digest, str):
            raise ValueError(f"round head of {tenant_id!r} has a wrong type")
        heads.append(ChainHead(tenant_id, seq, digest))
    return tuple(sorted(heads, key=lambda h: h.tenant_id))
