"""Check a document's shape against the models and turn pydantic errors into located problems."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from signoff.core.definition import ACTION_ID_PATTERN
from signoff.manifest.errors import ManifestProblem, ProblemCode, format_path
from signoff.manifest.model import CODE_PATTERN, DURATION_PATTERN, HOOK_PATTERN, Manifest
from signoff.manifest.schema import allowed_fields
from signoff.manifest.source import Document, FieldPath

_PATTERN_HINTS = {
    DURATION_PATTERN: "expected a duration such as 90s, 30m, 24h, 7d or 1h30m",
    HOOK_PATTERN: "expected a Python reference as module:function",
    CODE_PATTERN: "expected an UPPER_SNAKE_CASE code (A-Z, 0-9, _)",
    ACTION_ID_PATTERN: "expected a lowercase id: a letter, then up to 63 of a-z 0-9 _ . -",
}
_MOVED = {
    ("spec", "executor", "http", "idempotent"): "http.idempotent was merged into "
    "spec.executor.idempotent (the executor deduplicates on operation_id; the HTTP executor sends "
    "it as Idempotency-Key): move the setting there",
}
_JSON_TYPES = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "a mapping",
    type(None): "null",
}


def suggest(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'resource'?)`` for a close spelling, else an empty string."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _data_path(data: Any, loc: tuple[int | str, ...], missing: bool) -> FieldPath:
    """The document path of a pydantic location, minus union-member tags such as ``'str'``."""
    path: list[str | int] = []
    current = data
    for index, part in enumerate(loc):
        last = index == len(loc) - 1
        in_dict = isinstance(current, dict) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if in_dict or in_list:
            current = current[part]
        elif not (last and missing and isinstance(current, dict)):
            continue
        path.append(part)
    return tuple(path)


def _describe(value: Any) -> str:
    for kind, name in _JSON_TYPES.items():
        if type(value) is kind:
            return name
    return type(value).__name__


def _problem(document: Document, path: FieldPath, error: ErrorDetails) -> ManifestProblem:
    kind = error["type"]
    if kind == "extra_forbidden" and path in _MOVED:
        return document.problem(path, ProblemCode.UNKNOWN_FIELD, _MOVED[path], key=True)
    if kind == "extra_forbidden":
        name = str(path[-1]) if path else "?"
        hint = suggest(name, allowed_fields(path[:-1])) or _misplaced(name, path)
        return document.problem(
            path, ProblemCode.UNKNOWN_FIELD, f"unknown field {name!r}{hint}", key=True
        )
    if kind == "missing":
        name = str(path[-1]) if path else "?"
        return document.problem(
            path, ProblemCode.MISSING_FIELD, f"missing required field {name!r}", key=True
        )
    if kind.endswith(("_type", "_parsing")) or kind == "model_attributes_type":
        expected = error["msg"].removeprefix("Input should be ")
        message = f"expected {expected}, got {_describe(error['input'])}"
        return document.problem(path, ProblemCode.WRONG_TYPE, message)
    message = error["msg"]
    if kind == "string_pattern_mismatch":
        message = _PATTERN_HINTS.get(str((error.get("ctx") or {}).get("pattern")), message)
    elif kind == "literal_error":
        message = message.replace("Input should be", "expected")
    on_key = error["loc"][-1:] == ("[key]",)  # a mapping key itself is wrong: point at it
    return document.problem(
        path, ProblemCode.INVALID_VALUE, f"{message} (got {error['input']!r})", key=on_key
    )


def _misplaced(name: str, path: FieldPath) -> str:
    """``name`` belongs to an enclosing mapping: the key is most likely indented too far."""
    for end in range(len(path) - 2, -1, -1):
        owner = path[:end]
        if name in allowed_fields(owner):
            where = format_path(owner) or "the top level"
            return f"; {name!r} is a field of {where}: is it indented too far?"
    return ""


def check_shape(document: Document) -> tuple[Manifest | None, list[ManifestProblem]]:
    """Validate the shape; every error becomes one problem (union branches merged)."""
    if not isinstance(document.data, dict):
        return None, [
            document.problem(
                (),
                ProblemCode.WRONG_TYPE,
                f"a manifest is a mapping, got {_describe(document.data)}",
            )
        ]
    try:
        return Manifest.model_validate(document.data), []
    except ValidationError as exc:
        merged: dict[tuple[FieldPath, ProblemCode], ManifestProblem] = {}
        for error in exc.errors(include_url=False):
            path = _data_path(document.data, error["loc"], missing=error["type"] == "missing")
            problem = _problem(document, path, error)
            earlier = merged.get((path, problem.code))
            if earlier is not None and problem.code is ProblemCode.WRONG_TYPE:
                # ``str | bool`` fields fail once per branch: say "a string or a boolean" once.
                expected = earlier.message.split(", got ")[0]
                alternative = problem.message.removeprefix("expected ")
                problem = document.problem(path, problem.code, f"{expected} or {alternative}")
            merged[(path, problem.code)] = problem
        return None, list(merged.values())


def document_path(text: str) -> FieldPath:
    """Parse ``spec.policy.deny[1].when`` back into ``("spec", "policy", "deny", 1, "when")``."""
    parts: list[str | int] = []
    for chunk in text.split("."):
        name, _, rest = chunk.partition("[")
        if name:
            parts.append(name)
        for index in filter(None, rest.replace("]", "").split("[")) if rest else ():
            parts.append(int(index))
    return tuple(parts)
