"""CEL expressions compiled once, with precise positions when they do not compile."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import cel

_POSITION = re.compile(r"<input>:(\d+):(\d+):\s*(.*)")


@dataclass(frozen=True, slots=True)
class CelCompileError(Exception):
    """An expression that does not parse; ``line``/``column`` are 1-based within the expression."""

    expression: str
    reason: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f" at column {self.column}" if self.column is not None else ""
        return f"invalid CEL{where}: {self.reason}"


class CelEvaluationError(Exception):
    """An expression failed while evaluating (missing field, type mismatch)."""


@dataclass(frozen=True, slots=True)
class CelExpression:
    source: str
    program: cel.Program
    # The root names the expression refers to (None: unknown, pass everything). Converting a
    # variable into CEL costs more than evaluating most expressions, so pass only these.
    names: frozenset[str] | None = None

    def evaluate(self, variables: dict[str, Any]) -> Any:
        names = self.names
        if names is not None:
            variables = {name: variables[name] for name in names if name in variables}
        try:
            return self.program.execute(variables)
        except Exception as exc:  # the CEL binding raises several types; all mean "cannot decide"
            raise CelEvaluationError(f"{type(exc).__name__}: {exc}") from exc

    def evaluate_bool(self, variables: dict[str, Any]) -> bool:
        value = self.evaluate(variables)
        if not isinstance(value, bool):
            raise CelEvaluationError(f"expected a bool, got {type(value).__name__}")
        return value


def compile_cel(source: str) -> CelExpression:
    try:
        program = cel.compile(source)
        return CelExpression(source, program, frozenset(program.variables()))
    except Exception as exc:
        message = str(exc)
        match = _POSITION.search(message)
        if match is None:
            raise CelCompileError(source, message.splitlines()[0] if message else "") from exc
        raise CelCompileError(
            source, match.group(3).strip(), int(match.group(1)), int(match.group(2))
        ) from exc
