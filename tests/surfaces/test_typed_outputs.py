"""Typed, portable output schemas: each action tool lists its codes and types its ``output``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema_rs
from mcp import Client

from signoff import Code
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.executors.http import executor as http_module
from signoff.executors.http.executor import BUILT_IN_CODES
from signoff.manifest import ProblemCode, load_manifest_dir
from signoff.store.memory import InMemoryStore
from signoff.surfaces.mcp import SignoffMCP, fixed_identity, make_caller
from tests.manifest.support import edited, only_problem, write
from tests.surfaces.support import check_output, tool_named
from tests.surfaces.test_tool_names import demo_surface

TYPED = edited(
    "  results:\n",
    "  output:\n"
    "    type: object\n"
    "    properties:\n"
    "      echo: {type: object}\n"
    "    required: [echo]\n"
    "    additionalProperties: false\n"
    "  results:\n",
)


def unportable(schema: Any, where: str = "") -> list[str]:
    """What a strict host or the Inspector's strict lint flags, as ``path: reason``."""
    found: list[str] = []
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            found += unportable(item, f"{where}/{index}")
    elif isinstance(schema, dict):
        if isinstance(schema.get("type"), list):
            found.append(f"{where}: type array {schema['type']}")
        if "$ref" in schema:
            found.append(f"{where}: $ref")
        text = schema.get("description")
        if isinstance(text, str) and re.search(r"§|``|contract|:class:|:func:", text):
            found.append(f"{where}: internal wording {text!r}")
        for key, value in schema.items():
            if key not in ("enum", "const", "default", "required"):
                found += unportable(value, f"{where}/{key}")
    return found


def typed_surface(tmp_path: Path) -> SignoffMCP:
    write(tmp_path / "manifests", "typed.yaml", TYPED)
    registry = ActionRegistry(load_manifest_dir(tmp_path / "manifests"))
    caller = make_caller("agent-1", "acme", "billing")
    return SignoffMCP(Runtime(registry, InMemoryStore()), fixed_identity(caller))


async def test_no_advertised_schema_has_type_arrays_refs_or_internal_wording() -> None:
    async with Client(demo_surface().server) as client:
        listed = (await client.list_tools()).tools
    found = [
        f"{tool.name}{problem}"
        for tool in listed
        for schema in (tool.input_schema, tool.output_schema)
        for problem in unportable(schema)
    ]
    assert found == []


async def test_an_action_tool_lists_the_codes_its_stages_and_results_can_produce() -> None:
    async with Client(demo_surface().server) as client:
        tool = tool_named((await client.list_tools()).tools, "invoice_cancel")
    assert tool.output_schema is not None
    codes = set(tool.output_schema["properties"]["code"]["enum"])
    assert {"INVOICE_ALREADY_PAID", "AMOUNT_OVER_LIMIT", "APPROVAL_REQUIRED"} <= codes
    assert {Code.SUCCEEDED, Code.INPUT_VALIDATION_FAILED, Code.POLICY_DENIED} <= codes
    # Answers to other requests (an approver's vote, a callback) are not outcomes of this call.
    assert Code.APPROVER_NOT_ELIGIBLE not in codes and Code.ACTION_DEFERRED not in codes


async def test_real_outcomes_of_every_kind_validate_against_the_typed_schema(
    tmp_path: Path,
) -> None:
    async with Client(typed_surface(tmp_path).server) as client:
        tool = tool_named((await client.list_tools()).tools, "demo_act")
        calls: list[dict[str, Any]] = [
            {"invoice_id": "INV-1", "amount": 10.0, "idempotency_key": "a"},
            {"invoice_id": "INV-1", "amount": 5000.0, "idempotency_key": "b"},
            {"invoice_id": "INV-1", "amount": 500000.0, "idempotency_key": "c"},
            {"invoice_id": "INV-1", "idempotency_key": "d"},
        ]
        results = [await client.call_tool("demo_act", arguments) for arguments in calls]
    codes = [check_output(tool, result)["code"] for result in results]
    assert codes == [
        Code.SUCCEEDED,
        Code.APPROVAL_REQUIRED,
        "AMOUNT_OVER_LIMIT",
        Code.INPUT_VALIDATION_FAILED,
    ]


async def test_the_typed_schema_refuses_a_succeeded_output_of_another_shape(
    tmp_path: Path,
) -> None:
    async with Client(typed_surface(tmp_path).server) as client:
        tool = tool_named((await client.list_tools()).tools, "demo_act")
        result = await client.call_tool(
            "demo_act", {"invoice_id": "INV-1", "amount": 10.0, "idempotency_key": "a"}
        )
    assert tool.output_schema is not None
    validator = jsonschema_rs.Draft202012Validator(tool.output_schema)
    good = check_output(tool, result)
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "output": {"refund_id": "R-1"}})
    assert not validator.is_valid({**good, "code": "SOMETHING_UNDECLARED"})
    # A failure may carry details of another shape; only SUCCEEDED is typed.
    failed = {**good, "status": "FAILED", "code": "INVOICE_ALREADY_PAID", "output": {"x": 1}}
    assert validator.is_valid(failed)


def test_an_output_schema_that_is_not_a_valid_json_schema_is_a_manifest_error(
    tmp_path: Path,
) -> None:
    write(
        tmp_path / "m",
        "a.yaml",
        edited("      echo: {type: object}", "      echo: {type: 5}", TYPED),
    )
    problem = only_problem(tmp_path / "m")
    assert problem.code is ProblemCode.INVALID_JSON_SCHEMA
    assert problem.path.startswith("spec.output")


def test_an_output_schema_must_describe_an_object(tmp_path: Path) -> None:
    text = edited("  output:\n    type: object\n", "  output:\n    type: array\n", TYPED)
    write(tmp_path / "m", "a.yaml", text)
    problem = only_problem(tmp_path / "m")
    assert (problem.code, problem.path) == (ProblemCode.INVALID_JSON_SCHEMA, "spec.output.type")


def test_the_http_executors_built_in_codes_are_all_declared() -> None:
    source = Path(http_module.__file__).parent
    literals = {
        code
        for name in ("executor.py", "response.py")
        for code in re.findall(r'"(HTTP_[A-Z_]+)"', (source / name).read_text())
    }
    assert literals == set(BUILT_IN_CODES)


def test_a_programmatic_action_with_open_codes_keeps_a_plain_string_code() -> None:
    from signoff.surfaces.mcp.schemas import action_outcome_schema
    from tests.surfaces.support import world

    (action,) = [a for a in world().runtime.actions() if a.id == "invoice.get"]
    schema = action_outcome_schema(action)
    assert "enum" not in schema["properties"]["code"]
    assert json.dumps(schema) == json.dumps(action_outcome_schema(action))


ENFORCED = TYPED.replace(
    "tests.manifest.hooks:echo", "tests.surfaces.typed_hooks:by_input"
).replace("tests.manifest.hooks:allow", "tests.surfaces.typed_hooks:deny_undeclared")


async def _call(tmp_path: Path, note: str) -> tuple[dict[str, Any], list[str | None]]:
    write(tmp_path / "manifests", "typed.yaml", ENFORCED)
    registry = ActionRegistry(load_manifest_dir(tmp_path / "manifests"))
    runtime = Runtime(registry, InMemoryStore())
    surface = SignoffMCP(runtime, fixed_identity(make_caller("agent-1", "acme", "billing")))
    async with Client(surface.server) as client:
        tool = tool_named((await client.list_tools()).tools, "demo_act")
        arguments = {"invoice_id": "INV-1", "amount": 10.0, "note": note, "idempotency_key": note}
        outcome = check_output(tool, await client.call_tool("demo_act", arguments))
    events = await runtime.audit_trail(outcome["run_id"], "acme")
    return outcome, [event.code for event in events]


async def test_an_output_of_the_declared_shape_succeeds(tmp_path: Path) -> None:
    outcome, _ = await _call(tmp_path, "fine")
    assert outcome["code"] == Code.SUCCEEDED
    assert outcome["output"]["echo"]["note"] == "fine"


async def test_an_executor_output_of_another_shape_is_action_failed_for_review(
    tmp_path: Path,
) -> None:
    outcome, codes = await _call(tmp_path, "wrong-shape")
    assert (outcome["status"], outcome["code"], outcome["retry"]) == (
        "FAILED",
        Code.ACTION_FAILED,
        "MANUAL_REVIEW",
    )
    assert "R-1" not in outcome["message"]
    assert outcome["output"] is None
    assert codes[-1] == Code.ACTION_FAILED  # the run's audit trail records the refusal


async def test_an_executor_code_the_manifest_does_not_declare_is_action_failed(
    tmp_path: Path,
) -> None:
    outcome, _ = await _call(tmp_path, "code:INVOICE_LOCKED")
    assert (outcome["code"], outcome["retry"]) == (Code.ACTION_FAILED, "MANUAL_REVIEW")
    assert "INVOICE_LOCKED" in outcome["message"]


async def test_a_declared_executor_code_keeps_its_mapping(tmp_path: Path) -> None:
    outcome, _ = await _call(tmp_path, "code:INVOICE_ALREADY_PAID")
    assert (outcome["code"], outcome["retry"]) == ("INVOICE_ALREADY_PAID", "NEVER")


async def test_a_guard_code_the_manifest_does_not_declare_is_pre_execution_denied(
    tmp_path: Path,
) -> None:
    outcome, _ = await _call(tmp_path, "guard")
    assert (outcome["status"], outcome["code"]) == ("DENIED", Code.PRE_EXECUTION_DENIED)
