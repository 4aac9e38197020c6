"""How actions and signoff's own tools look to an MCP client: names, schemas, annotations.

Everything here is presentation. Which tools a caller sees follows the same ``policy.roles`` the
pipeline enforces; whether a call is allowed is decided by the pipeline alone, so the advertised
schemas are advice to the model, never a gate (the SDK does not validate arguments either).
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from signoff.core.codes import Code, ExecutionStatus, RetryDisposition
from signoff.core.definition import Effect, KeyRequirement, tool_name
from signoff.core.identity import Principal
from signoff.core.policy import roles_allow
from signoff.core.registry import CompiledAction
from signoff.core.results import ActionOutcome
from signoff.surfaces.mcp.schemas import action_outcome_schema, model_schema, outcome_schema

GET_RUN = "signoff_get_run"
CANCEL_RUN = "signoff_cancel_run"
LIST_RUNS = "signoff_list_runs"
ACTION_META_KEY = "signoff/action"
"""``_meta`` key of an action tool: the action id (``invoice.cancel``) its name was mapped from."""
IDEMPOTENCY_KEY = "idempotency_key"
MAX_WAIT_SECONDS = 30
MAX_LIST_LIMIT = 100
RUN_URI_PREFIX = "signoff://runs/"
RUN_URI_TEMPLATE = RUN_URI_PREFIX + "{run_id}"

GOVERNANCE_SENTENCE = (
    "Governed by signoff: the call may need human approval (it then returns PENDING_APPROVAL with "
    "a run_id to follow with signoff_get_run); when retrying, reuse the same idempotency_key."
)


class RunList(BaseModel):
    """What ``signoff_list_runs`` returns: newest first, and a cursor for the next page."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runs: list[ActionOutcome]
    next_before: str | None = Field(
        default=None, description="Pass as `before` to get the next (older) page; null at the end."
    )
    code: str = Field(
        default=Code.SUCCEEDED, description="INPUT_VALIDATION_FAILED on bad arguments."
    )
    message: str = ""


@cache
def run_list_schema() -> dict[str, Any]:
    schema = model_schema(RunList)
    schema["description"] = "Runs you may read, newest first."
    schema["properties"]["runs"]["items"] = outcome_schema()
    return schema


def visible_to(action: CompiledAction, principal: Principal) -> bool:
    """The caller may propose it: the role rule the pipeline's policy stage applies first."""
    return roles_allow(action, principal)


def action_tool(action: CompiledAction) -> types.Tool:
    definition = action.definition
    key_required = definition.idempotency.key is KeyRequirement.REQUIRED
    read_only = definition.effect is Effect.READ_ONLY
    description = " ".join(
        part for part in (definition.description or definition.title, GOVERNANCE_SENTENCE) if part
    )
    return types.Tool(
        name=tool_name(definition.id),
        title=f"{definition.title} ({definition.id})" if definition.title else definition.id,
        description=description,
        input_schema=_with_idempotency_key(definition.input_schema, required=key_required),
        output_schema=action_outcome_schema(action),
        annotations=types.ToolAnnotations(
            title=definition.title or None,
            read_only_hint=read_only,
            destructive_hint=None if read_only else definition.effect is not Effect.EXTERNAL_SEND,
            idempotent_hint=True if key_required else None,
            open_world_hint=definition.effect is Effect.EXTERNAL_SEND or None,
        ),
        meta={ACTION_META_KEY: definition.id},
    )


def _with_idempotency_key(schema: dict[str, Any], *, required: bool) -> dict[str, Any]:
    merged = copy.deepcopy(schema)
    properties = merged.setdefault("properties", {})
    properties[IDEMPOTENCY_KEY] = {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": "^[\\x20-\\x7e]+$",
        "description": (
            "Your key for this logical operation (1-255 printable ASCII characters). Reuse it "
            "when retrying so the action happens at most once; never reuse it for other input."
        ),
    }
    if required:
        names = list(merged.get("required", []))
        if IDEMPOTENCY_KEY not in names:
            names.append(IDEMPOTENCY_KEY)
        merged["required"] = names
    return merged


def builtin_tools() -> list[types.Tool]:
    read_only = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return [
        types.Tool(
            name=GET_RUN,
            title="Get a run",
            description=(
                "The current outcome of a run you (or your tenant) proposed, by run_id. With "
                f"wait_seconds (0-{MAX_WAIT_SECONDS}) it waits for the run to change before "
                "answering — use it to follow a PENDING_APPROVAL or ACCEPTED run."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "run_id": {"type": "string", "minLength": 1, "maxLength": 64},
                    "wait_seconds": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
                },
                "required": ["run_id"],
                "additionalProperties": False,
            },
            output_schema=outcome_schema(),
            annotations=read_only,
        ),
        types.Tool(
            name=CANCEL_RUN,
            title="Cancel a run",
            description=(
                "Cancel a run that has not started executing (for example one waiting for "
                "approval). A run already executing or finished is left as it is; the result "
                "code says which."
            ),
            input_schema={
                "type": "object",
                "properties": {"run_id": {"type": "string", "minLength": 1, "maxLength": 64}},
                "required": ["run_id"],
                "additionalProperties": False,
            },
            output_schema=outcome_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        ),
        types.Tool(
            name=LIST_RUNS,
            title="List runs",
            description=(
                "Recent runs in your tenant, newest first, optionally only those with one "
                "status (e.g. PENDING_APPROVAL)."
            ),
            input_schema={
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": [str(s) for s in ExecutionStatus]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST_LIMIT},
                    "before": {
                        "type": "string",
                        "description": "A run_id: list only runs older than it (paging).",
                    },
                },
                "additionalProperties": False,
            },
            output_schema=run_list_schema(),
            annotations=read_only,
        ),
    ]


def refusal(tool: str, code: str, message: str) -> ActionOutcome:
    """A built-in tool's answer to arguments it cannot use: no run was involved."""
    return ActionOutcome(
        run_id="",
        action=tool,
        status=ExecutionStatus.VALIDATION_FAILED,
        code=code,
        retry=RetryDisposition.AFTER_CORRECTION,
        message=message,
    )


def invalid_arguments(tool: str, message: str) -> ActionOutcome:
    return refusal(tool, Code.INPUT_VALIDATION_FAILED, message)


def runtime_failure(tool: str) -> ActionOutcome:
    """A built-in tool could not answer because signoff itself failed (a store fault)."""
    return ActionOutcome(
        run_id="",
        action=tool,
        status=ExecutionStatus.FAILED,
        code=Code.ACTION_RUNTIME_FAILED,
        retry=RetryDisposition.AFTER_BACKOFF,
        message="signoff could not answer right now; nothing was changed. Try again later.",
    )
