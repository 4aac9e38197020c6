"""Definitions compiled for the hot path, and the registry the pipeline resolves them from."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from signoff.core.cel_expr import CelCompileError, CelExpression, compile_cel
from signoff.core.definition import ActionDefinition, DenyRule, tool_name
from signoff.core.possible import possible_codes
from signoff.core.validation import InputValidator, SchemaInvalid, compile_schema


@dataclass(frozen=True, slots=True)
class DefinitionProblem:
    """One thing wrong with a definition, located by its field path (``policy.deny[1].when``)."""

    path: str
    message: str
    column: int | None = None


class InvalidDefinition(ValueError):
    def __init__(self, action_id: str, problems: list[DefinitionProblem]) -> None:
        self.action_id = action_id
        self.problems = problems
        super().__init__(f"{action_id}: " + "; ".join(f"{p.path}: {p.message}" for p in problems))


@dataclass(frozen=True, slots=True)
class CompiledAction:
    definition: ActionDefinition
    validator: InputValidator
    resource: CelExpression | None
    deny: tuple[tuple[DenyRule, CelExpression], ...]
    approval_when: CelExpression
    revision: str
    escalations: tuple[tuple[CelExpression, int], ...] = ()
    output_validator: InputValidator | None = None
    codes: frozenset[str] | None = None
    """Every code a call can answer with (``possible_codes``); ``None``: open."""
    # One compiled ``sum`` per entry of ``definition.limits`` (None: a count-only limit).
    limit_sums: tuple[CelExpression | None, ...] = ()
    confirm_when: CelExpression | None = None
    """``approval.confirm.when`` compiled (``None``: the action asks no confirmation)."""

    @property
    def id(self) -> str:
        return self.definition.id

    def declares(self, code: str) -> bool:
        """``code`` is one this action's manifest declares (``results:``, deny rules, executor
        codes) — an open (programmatic) executor's other codes are not."""
        if self.codes is not None:
            return code in self.codes
        return code in self.definition.results or any(
            rule.code == code for rule in self.definition.policy.deny
        )


def compile_action(definition: ActionDefinition) -> CompiledAction:
    """Check the schema and compile every expression once; report every problem found."""
    problems: list[DefinitionProblem] = []

    def cel_at(path: str, source: str) -> CelExpression | None:
        try:
            return compile_cel(source)
        except CelCompileError as exc:
            problems.append(DefinitionProblem(path, str(exc), exc.column))
            return None

    validator: InputValidator | None = None
    try:
        validator = compile_schema(definition.input_schema, definition.sensitive_fields)
    except SchemaInvalid as exc:
        where = exc.problem.where
        problems.append(
            DefinitionProblem(
                "input" + (f" ({where})" if where else ""),
                f"invalid JSON Schema: {exc.problem.message}",
            )
        )
    if validator is not None and definition.input_schema.get("type") != "object":
        problems.append(DefinitionProblem("input.type", "the input schema must have type: object"))

    output_validator: InputValidator | None = None
    if definition.output_schema is not None:
        try:
            output_validator = compile_schema(definition.output_schema, definition.sensitive_fields)
        except SchemaInvalid as exc:
            problems.append(
                DefinitionProblem("output", f"invalid JSON Schema: {exc.problem.message}")
            )

    resource = cel_at("resource", definition.resource) if definition.resource else None
    deny: list[tuple[DenyRule, CelExpression]] = []
    for index, rule in enumerate(definition.policy.deny):
        expr = cel_at(f"policy.deny[{index}].when", rule.when)
        if expr is not None:
            deny.append((rule, expr))
    approval_when = cel_at("approval.when", definition.approval.when)
    escalations: list[tuple[CelExpression, int]] = []
    for index, tier in enumerate(definition.approval.escalate):
        tier_when = cel_at(f"approval.escalate[{index}].when", tier.when)
        if tier_when is not None:
            escalations.append((tier_when, tier.count))
    confirm = definition.approval.confirm
    confirm_when = cel_at("approval.confirm.when", confirm.when) if confirm is not None else None
    limit_sums = tuple(
        cel_at(f"limits[{index}].sum", limit.sum) if limit.sum is not None else None
        for index, limit in enumerate(definition.limits)
    )

    if problems or validator is None or approval_when is None:
        raise InvalidDefinition(definition.id, problems)
    return CompiledAction(
        definition=definition,
        validator=validator,
        resource=resource,
        deny=tuple(deny),
        approval_when=approval_when,
        revision=definition.revision(),
        escalations=tuple(escalations),
        output_validator=output_validator,
        codes=frozenset(codes) if (codes := possible_codes(definition)) is not None else None,
        limit_sums=limit_sums,
        confirm_when=confirm_when,
    )


def output_mismatch(action: CompiledAction, output: Any) -> str | None:
    """Where a successful output breaks ``spec.output`` (``/invoice_id: ...``), or ``None``."""
    if action.output_validator is None:
        return None
    errors = action.output_validator.errors(output)
    return f"{errors[0]['path']}: {errors[0]['message']}" if errors else None


def validate_input(action: CompiledAction, data: Any) -> list[dict[str, str]]:
    """Every schema violation as ``{"path": "/a/0", "message": ...}``, at most 20, sorted by path.

    Messages are bounded and never show a ``sensitive`` field's value (``validation.py``)."""
    return action.validator.errors(data)


class ActionRegistry:
    """The current set of actions. ``replace`` swaps the whole set at once (manifest reload)."""

    def __init__(self, actions: Iterable[CompiledAction | ActionDefinition] = ()) -> None:
        self._lock = threading.Lock()
        self._actions: dict[str, CompiledAction] = {}
        self._tools: dict[str, CompiledAction] = {}
        self.generation = 0
        self.replace(actions)

    def replace(self, actions: Iterable[CompiledAction | ActionDefinition]) -> None:
        compiled = [a if isinstance(a, CompiledAction) else compile_action(a) for a in actions]
        table: dict[str, CompiledAction] = {}
        tools: dict[str, CompiledAction] = {}
        for action in compiled:
            if action.id in table:
                raise ValueError(f"action {action.id!r} is defined twice")
            other = tools.setdefault(tool_name(action.id), action)
            if other is not action:
                raise ValueError(
                    f"actions {other.id!r} and {action.id!r} have the same tool name "
                    f"{tool_name(action.id)!r}"
                )
            table[action.id] = action
        with self._lock:
            self._actions = table
            self._tools = tools
            self.generation += 1

    def register(self, action: CompiledAction | ActionDefinition) -> None:
        with self._lock:
            current = dict(self._actions)
        compiled = action if isinstance(action, CompiledAction) else compile_action(action)
        current[compiled.id] = compiled
        self.replace(current.values())

    def resolve(self, action_id: str) -> CompiledAction | None:
        return self._actions.get(action_id)

    def resolve_tool(self, name: str) -> CompiledAction | None:
        """The action whose MCP tool name is ``name`` (``replace`` keeps names unique)."""
        return self._tools.get(name)

    def all(self) -> list[CompiledAction]:
        return sorted(self._actions.values(), key=lambda a: a.id)
