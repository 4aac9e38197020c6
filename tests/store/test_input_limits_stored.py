"""One request can never poison the database: hostile arguments are refused before anything is
stored, and the refused run itself reads back, lists, exports and verifies (issue finding 1)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from signoff import Code
from signoff.audit.verify import verify_trail
from signoff.core.input_limits import InputLimits
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from tests.helpers import NO_APPROVAL, Recorder, definition, memory_runtime, proposal, stored_run
from tests.store.conftest import Backend

OPEN_SCHEMA: dict[str, Any] = {"type": "object"}


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


HOSTILE = {
    "250 deep": {"invoice_id": "INV-1", "note": nested(250)},
    "3 MB string": {"invoice_id": "X" * 3_000_000},
    "NUL": {"invoice_id": "INV-\x001"},
    "lone surrogate key": {"\ud800": 1},
    "NaN": {"amount": math.nan},
    "Infinity": {"amount": math.inf},
    "2**64": {"amount": 2**64},
}


@pytest.mark.parametrize("arguments", list(HOSTILE.values()), ids=list(HOSTILE))
async def test_hostile_arguments_are_refused_before_storage_and_the_run_reads_back(
    sql_backend: Backend, tenant: str, arguments: dict[str, Any]
) -> None:
    store = await sql_backend.open_sql()
    recorder = Recorder()
    runtime = Runtime(
        ActionRegistry(
            [definition(recorder, input_schema=OPEN_SCHEMA, resource=None, approval=NO_APPROVAL)]
        ),
        store,
    )
    refused = await runtime.propose(proposal(arguments, key=None, tenant=tenant))
    assert refused.code == Code.INPUT_VALIDATION_FAILED
    assert len(refused.message) < 200 and len(refused.model_dump_json()) < 2000
    assert recorder.count == 0
    run = await stored_run(store, refused.run_id)
    assert len(json.dumps(run.input)) < 4000
    listed = await runtime.list_runs(tenant)
    assert [r.run_id for r in listed] == [refused.run_id]
    assert store.decode_faults.rows() == []
    report = await verify_trail(store, None, tenant)
    assert report.problems == []


async def test_a_tool_name_with_nul_is_recorded_refused_not_a_runtime_failure(
    sql_backend: Backend, tenant: str
) -> None:
    store = await sql_backend.open_sql()
    runtime = Runtime(ActionRegistry([definition(Recorder())]), store)
    for name in ("invoice\x00cancel", "\x00"):
        refused = await runtime.propose(proposal({}, key="k\x00", action=name, tenant=tenant))
        assert refused.code == Code.INPUT_VALIDATION_FAILED
        run = await stored_run(store, refused.run_id)
        assert "\x00" not in run.action_id and "\x00" not in (run.idempotency_key or "")


async def test_the_limits_are_settings() -> None:
    runtime = memory_runtime(definition(Recorder(), input_schema=OPEN_SCHEMA, resource=None))
    small = Runtime(
        ActionRegistry([definition(Recorder(), input_schema=OPEN_SCHEMA, resource=None)]),
        InMemoryStore(),
        input_limits=InputLimits(max_bytes=100, max_depth=3),
    )
    args = {"a": {"b": {"c": {"d": 1}}}, "amount": 1}
    assert (await small.propose(proposal(args))).code == Code.INPUT_VALIDATION_FAILED
    assert (await runtime.propose(proposal(args))).code != Code.INPUT_VALIDATION_FAILED
    assert InputLimits.from_env({"SIGNOFF_MAX_INPUT_DEPTH": "3"}).max_depth == 3
    with pytest.raises(ValueError):
        InputLimits.from_env({"SIGNOFF_MAX_INPUT_BYTES": "lots"})
