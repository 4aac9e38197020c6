"""Output schemas as MCP hosts can use them: self-contained, portable, typed per action.

Portable means what strict hosts and the MCP Inspector's ``--strict`` schema lint accept: no
``$ref``, every ``type`` a single string (a nullable value is ``anyOf: [{type: X}, {type: null}]``,
never ``type: [X, "null"]``), and descriptions written for the agent, not for signoff's developers.
Typed means an action tool's ``code`` lists the codes that action can answer with, and its
``output`` is the action's ``spec.output`` when it declares one.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from pydantic import BaseModel

from signoff.core.possible import possible_codes
from signoff.core.registry import CompiledAction
from signoff.core.results import ActionOutcome

OUTCOME_DESCRIPTION = (
    "What happened to the proposed action. Decide on status, code and retry, never on message. "
    "PENDING_APPROVAL and ACCEPTED are not final: follow run_id with signoff_get_run."
)
FIELD_DESCRIPTIONS = {
    "run_id": "The run's id; follow it with signoff_get_run. Empty when no run was involved.",
    "action": "The action id from the manifest, e.g. invoice.cancel (its tool is invoice_cancel).",
    "status": "The broad outcome.",
    "code": "A stable, machine-readable result code.",
    "retry": "Whether and when a retry can help; retry only with the same idempotency_key.",
    "message": "A human-readable explanation; not for decisions.",
    "output": "The action's result on SUCCEEDED; otherwise null or the failure's details.",
    "approval": "The approval this run waits for, or null.",
    "duplicate_of": "For a replayed or in-progress duplicate: the original run id, else null.",
}


def portable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``$ref``s resolved in place, no titles, and single-string ``type``s."""
    definitions: dict[str, Any] = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return walk(definitions[node["$ref"].rsplit("/", 1)[-1]])
        out = {key: walk(value) for key, value in node.items() if key not in ("$defs", "title")}
        kinds = out.get("type")
        if isinstance(kinds, list):
            del out["type"]
            branches = [{"type": kind} for kind in kinds]
            out["anyOf"] = branches if "anyOf" not in out else [*out["anyOf"], *branches]
        return out

    flat: dict[str, Any] = walk(schema)
    return flat


def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    return portable(model.model_json_schema(mode="serialization"))


@cache
def outcome_schema() -> dict[str, Any]:
    """The ``ActionOutcome`` schema every action tool and ``signoff_get_run`` share."""
    schema = model_schema(ActionOutcome)
    schema["description"] = OUTCOME_DESCRIPTION
    for name, text in FIELD_DESCRIPTIONS.items():
        schema["properties"][name]["description"] = text
    return schema


def action_outcome_schema(action: CompiledAction) -> dict[str, Any]:
    """The outcome schema of one action: its codes as an ``enum``, its ``spec.output`` typed."""
    definition = action.definition
    codes = possible_codes(definition)
    output = definition.output_schema
    if codes is None and output is None:
        return outcome_schema()
    schema = copy.deepcopy(outcome_schema())
    properties = schema["properties"]
    if codes is not None:
        properties["code"]["enum"] = list(codes)
    if output is not None:
        typed = portable(copy.deepcopy(output))
        properties["output"] = {
            "description": FIELD_DESCRIPTIONS["output"],
            "anyOf": [typed, {"type": "object"}, {"type": "null"}],
            "default": None,
        }
        # On SUCCEEDED the output is exactly the action's declared shape.
        schema["allOf"] = [
            {
                "if": {"properties": {"status": {"const": "SUCCEEDED"}}, "required": ["status"]},
                "then": {"properties": {"output": typed}},
            }
        ]
    return schema
