"""Mistakes that load without an error but do not mean what was written.

- a value YAML split at a comma (``{description: Amount in EUR, as invoiced}`` is a description
  ``Amount in EUR`` and a stray key ``as invoiced`` with no value): quote the whole value;
- a CEL expression that cannot evaluate on input of the declared types
  (``input.amount > '50000'`` against ``amount: {type: number}``), found by evaluating it with a
  sample input built from ``spec.input``;
- a ``required`` property an ``additionalProperties: false`` schema does not declare (no input
  could ever be valid);
- an HTTP status mapped to a code ``spec.results`` does not declare.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode

from signoff.core.cel_expr import CelCompileError, compile_cel
from signoff.manifest.errors import ManifestProblem, ProblemCode
from signoff.manifest.source import Document, FieldPath

_NUMBER_SAMPLES: tuple[Any, ...] = (1.5, 1)


def split_values(document: Document, text: str) -> list[ManifestProblem]:
    """Flow-mapping entries that have no ``:`` and follow a plain string: a comma split them."""
    problems = []
    offsets = _line_offsets(text)
    for path, node in document.values.items():
        if not isinstance(node, MappingNode) or not node.flow_style:
            continue
        previous: Node | None = None
        for key_node, value_node in node.value:
            if _colonless(key_node, value_node, text, offsets) and _plain_text(previous):
                assert isinstance(previous, ScalarNode)
                whole = f"{previous.value}, {key_node.value}"
                problems.append(
                    document.problem(
                        (*path, key_node.value),
                        ProblemCode.SPLIT_VALUE,
                        f"YAML split {whole!r} at the comma into a value and a stray key "
                        f'{key_node.value!r}; quote the whole value: "{whole}"',
                        position=(key_node.start_mark.line + 1, key_node.start_mark.column + 1),
                    )
                )
            previous = value_node
    return problems


def _line_offsets(text: str) -> list[int]:
    offsets, total = [], 0
    for line in text.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    return offsets or [0]


def _colonless(key: Node, value: Node, text: str, offsets: list[int]) -> bool:
    """A key written without ``:`` (PyYAML gives it an empty null value)."""
    if not (isinstance(key, ScalarNode) and isinstance(value, ScalarNode)):
        return False
    if value.tag != "tag:yaml.org,2002:null" or value.value != "" or key.style is not None:
        return False
    end = key.end_mark
    if end.line >= len(offsets):
        return False
    rest = text[offsets[end.line] + end.column :].lstrip(" \t")
    return not rest.startswith(":")


def _plain_text(node: Node | None) -> bool:
    return isinstance(node, ScalarNode) and node.style is None and node.tag.endswith(":str")


def required_undeclared(document: Document, schema: Any) -> list[ManifestProblem]:
    """``required`` names missing from ``properties`` under ``additionalProperties: false``."""
    problems = []
    for subschema, where in _object_schemas(schema, ("spec", "input")):
        if subschema.get("additionalProperties") is not False:
            continue
        declared = subschema.get("properties")
        declared = declared if isinstance(declared, dict) else {}
        required = subschema.get("required")
        for index, name in enumerate(required if isinstance(required, list) else ()):
            if isinstance(name, str) and name not in declared:
                problems.append(
                    document.problem(
                        (*where, "required", index),
                        ProblemCode.INVALID_JSON_SCHEMA,
                        f"{name!r} is required but not declared in properties, and "
                        "additionalProperties: false forbids it: no input can be valid",
                    )
                )
    return problems


def _object_schemas(schema: Any, path: FieldPath) -> Iterator[tuple[dict[str, Any], FieldPath]]:
    if not isinstance(schema, dict):
        return
    yield schema, path
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name, child in properties.items():
            yield from _object_schemas(child, (*path, "properties", name))
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _object_schemas(items, (*path, "items"))


def sample_input(schema: Any, number: Any = 1.5) -> Any:
    """A value of the declared type with every declared property present."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        # A property of no single known type is left out: reading it then fails as a missing
        # field, which is not reported, so only declared types can produce a type error.
        sampled = {
            name: sample_input(child, number)
            for name, child in (properties.items() if isinstance(properties, dict) else ())
        }
        return {name: value for name, value in sampled.items() if value is not None}
    samples = {"string": "x", "integer": 1, "number": number, "boolean": True, "array": []}
    return samples.get(kind) if isinstance(kind, str) else None


def cel_type_errors(
    document: Document, path: FieldPath, source: str, input_schema: Any, action: dict[str, str]
) -> list[ManifestProblem]:
    """A type error CEL raises on every sample input of the declared types."""
    try:
        expression = compile_cel(source)
    except CelCompileError:
        return []  # reported by check_cel
    reasons = []
    for number in _NUMBER_SAMPLES:
        variables = {
            "input": sample_input(input_schema, number),
            "principal": {"id": "p", "roles": ["r"]},
            "tenant": "t",
            "proposer": {"type": "agent", "channel": "mcp"},
            "action": action,
            "resource": "r",
            "now": datetime(2026, 1, 1, tzinfo=UTC),
        }
        try:
            expression.program.execute(variables)
            return []
        except TypeError as exc:
            reasons.append(str(exc).split(".")[0])
        except Exception:
            return []  # a missing field or the like depends on the real input: not a type error
    return [
        document.problem(
            path,
            ProblemCode.CEL_TYPE_ERROR,
            f"{reasons[0]} for input of the types spec.input declares: compare like with like "
            "(a number with a number, e.g. 50000.0, not '50000')",
        )
    ]


def undeclared_status_codes(
    document: Document, statuses: Any, results: Any
) -> list[ManifestProblem]:
    """``status_codes`` values that ``spec.results`` does not declare."""
    declared = results if isinstance(results, dict) else {}
    base = ("spec", "executor", "http", "status_codes")
    return [
        document.problem(
            (*base, status),
            ProblemCode.UNDECLARED_CODE,
            f"HTTP {status} maps to {code}, which spec.results does not declare; "
            f"add {code}: {{status: FAILED, retry: ...}} to spec.results",
        )
        for status, code in (statuses.items() if isinstance(statuses, dict) else ())
        if isinstance(code, str) and code not in declared
    ]
