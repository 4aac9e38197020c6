"""Input validation with ``jsonschema-rs``: JSON Schema 2020-12, ECMA-262 ``pattern`` semantics.

``jsonschema-rs`` is a compiled validator: ``$`` in a ``pattern`` does not match before a trailing
newline (Python's ``re`` does, so ``"INV-1002\\n"`` used to pass ``^INV-[0-9]+$``), and it is
several times faster than the pure-Python ``jsonschema`` on the hot path.

Messages are for the agent and the approver: bounded (an error never embeds a huge value), with
control and bidi characters shown as escapes, and with the value of a ``sensitive`` field never
shown (contract §5: the mask applies to validation messages too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema_rs

from signoff.core.input_limits import safe_text
from signoff.core.visibility import paths_by_root

MAX_ERRORS = 20
MAX_MESSAGE_CHARS = 300
MAX_PATH_CHARS = 200


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    where: str
    message: str


class InputValidator:
    """A compiled schema. Build it with ``compile_schema``."""

    __slots__ = ("_sensitive", "_validator")

    def __init__(self, validator: Any, sensitive: Sequence[str] = ()) -> None:
        self._validator = validator
        # Input pointers only (``core.visibility`` reads the entries); output is not validated here.
        self._sensitive = tuple(list(path) for path in paths_by_root(sensitive)["input"])

    def is_valid(self, data: Any) -> bool:
        return bool(self._validator.is_valid(data))

    def errors(self, data: Any) -> list[dict[str, str]]:
        """Every violation as ``{"path": "/a/0", "message": ...}``, at most 20, sorted by path."""
        if self._validator.is_valid(data):
            return []  # the common case, without building any error
        found = sorted(
            self._validator.iter_errors(data), key=lambda e: [str(p) for p in e.instance_path]
        )
        return [self._render(err, data) for err in found[:MAX_ERRORS]]

    def _render(self, err: Any, data: Any) -> dict[str, str]:
        path = [str(p) for p in err.instance_path]
        pointer = safe_text("/" + "/".join(path), MAX_PATH_CHARS)
        message = str(err.message)
        if self._shows_sensitive(path, message, data):
            keyword = str(err.schema_path[-1]) if err.schema_path else "schema"
            message = f"the value is not valid ({keyword}); it is not shown because it is sensitive"
        return {"path": pointer, "message": safe_text(message, MAX_MESSAGE_CHARS)}

    def _shows_sensitive(self, path: list[str], message: str, data: Any) -> bool:
        for secret in self._sensitive:
            if path[: len(secret)] == secret:
                return True
            if secret[: len(path)] == path:
                # An error about an ancestor may quote the whole object, value included.
                value = _lookup(data, secret)
                if value is not _MISSING and _quoted(value, message):
                    return True
        return False


_MISSING = object()


def _lookup(data: Any, segments: list[str]) -> Any:
    for segment in segments:
        if isinstance(data, dict) and segment in data:
            data = data[segment]
        elif isinstance(data, list) and segment.isdigit() and int(segment) < len(data):
            data = data[int(segment)]
        else:
            return _MISSING
    return data


def _quoted(value: Any, message: str) -> bool:
    if value is None or isinstance(value, bool):
        return False
    texts = {str(value), json.dumps(value, ensure_ascii=False)}
    return any(text and text in message for text in texts)


def compile_schema(schema: dict[str, Any], sensitive: Sequence[str] = ()) -> InputValidator:
    """Check ``schema`` against the 2020-12 meta-schema and compile it (formats are checked).

    Raises ``SchemaInvalid`` naming where the schema is wrong."""
    try:
        jsonschema_rs.meta.validate(schema)
        validator = jsonschema_rs.Draft202012Validator(schema, validate_formats=True)
    except jsonschema_rs.ValidationError as exc:
        where = "/".join(str(p) for p in exc.instance_path)
        raise SchemaInvalid(SchemaProblem(where, safe_text(str(exc.message), 500))) from None
    except ValueError as exc:  # e.g. a pattern that is not a regular expression
        raise SchemaInvalid(SchemaProblem("", safe_text(str(exc).splitlines()[0], 500))) from None
    return InputValidator(validator, sensitive)


class SchemaInvalid(ValueError):
    def __init__(self, problem: SchemaProblem) -> None:
        self.problem = problem
        super().__init__(problem.message)
