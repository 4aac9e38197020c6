"""CEL expressions and the input JSON Schema, checked with precise positions.

``meaning.py`` runs every meaning check of a document and calls these two for the expressions.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs

from signoff.core.cel_expr import CelCompileError, compile_cel
from signoff.core.policy import CEL_VARIABLES
from signoff.manifest.errors import ManifestProblem, ProblemCode
from signoff.manifest.positions import line_column_offset, offset_position
from signoff.manifest.shape import suggest
from signoff.manifest.source import Document, FieldPath

# Variables bound by comprehension macros (``roles.exists(r, r == 'x')``) and ``cel.bind``.
_BOUND = re.compile(
    r"\b(?:all|exists|exists_one|map|filter|bind|transformList|transformMap)\(\s*"
    r"([A-Za-z_]\w*)\s*,(?:\s*([A-Za-z_]\w*)\s*,)?"
)
# The Draft 2020-12 metaschema (jsonschema-rs ships it: nothing is fetched), which every input
# and output schema must satisfy; each violation is reported at its path inside the schema.
_META = jsonschema_rs.Draft202012Validator({"$ref": "https://json-schema.org/draft/2020-12/schema"})
# Draft 2020-12's assertion and applicator keywords, then its annotations and identifiers: a key
# close to one of these (``additionalProperty``) is a misspelling worth reporting.
_VALIDATION = (
    "$dynamicRef $ref additionalProperties allOf anyOf const contains dependentRequired "
    "dependentSchemas enum exclusiveMaximum exclusiveMinimum format if items maxItems maxLength "
    "maxProperties maximum minItems minLength minProperties minimum multipleOf not oneOf pattern "
    "patternProperties prefixItems properties propertyNames required type unevaluatedItems "
    "unevaluatedProperties uniqueItems"
)
_ANNOTATIONS = (
    "$schema $id $ref $defs $anchor $comment $dynamicRef $dynamicAnchor title description "
    "default examples readOnly writeOnly deprecated format contentEncoding contentMediaType "
    "contentSchema definitions"
)
_KEYWORDS = sorted({*_VALIDATION.split(), *_ANNOTATIONS.split()})
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_VALUES = (
    "items", "additionalProperties", "not", "if", "then", "else", "contains",
    "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema",
)  # fmt: skip


def check_cel(document: Document, path: FieldPath, source: str) -> list[ManifestProblem]:
    """Compile ``source``; report a syntax error at its column, or a variable nobody provides."""
    try:
        compiled = compile_cel(source)
    except CelCompileError as exc:
        offset = line_column_offset(source, exc.line or 1, exc.column or 1)
        position = offset_position(document, path, offset)
        where = f" (column {exc.column} of the expression)" if exc.column else ""
        reason, _, expected = exc.reason.partition(" expecting ")
        if expected and len(expected) <= 40:  # ANTLR's full token lists help nobody
            reason = f"{reason}, expecting {expected}"
        return [
            document.problem(
                path,
                ProblemCode.INVALID_CEL,
                f"invalid CEL{where}: {reason}",
                position=position,
            )
        ]
    bound = {name for match in _BOUND.finditer(source) for name in match.groups() if name}
    problems = []
    for name in compiled.program.variables():
        if name in CEL_VARIABLES or name in bound:
            continue
        found = re.search(rf"(?<![\w.]){re.escape(name)}\b", source)
        problems.append(
            document.problem(
                path,
                ProblemCode.UNKNOWN_CEL_VARIABLE,
                f"unknown variable {name!r}{suggest(name, CEL_VARIABLES)}"
                f" (variables: {', '.join(CEL_VARIABLES)})",
                position=offset_position(document, path, found.start() if found else 0),
            )
        )
    return problems


def _subschemas(schema: Any, path: FieldPath) -> Iterator[tuple[dict[str, Any], FieldPath]]:
    if not isinstance(schema, dict):
        return
    yield schema, path
    for keyword in _SCHEMA_MAPS:
        children = schema.get(keyword)
        if isinstance(children, dict):
            for name, child in children.items():
                yield from _subschemas(child, (*path, keyword, name))
    for keyword in _SCHEMA_LISTS:
        children = schema.get(keyword)
        if isinstance(children, list):
            for index, child in enumerate(children):
                yield from _subschemas(child, (*path, keyword, index))
    for keyword in _SCHEMA_VALUES:
        if keyword in schema:
            yield from _subschemas(schema[keyword], (*path, keyword))


def check_input_schema(
    document: Document, path: FieldPath, schema: dict[str, Any], *, role: str = "input"
) -> list[ManifestProblem]:
    """Every metaschema violation, misspelt keywords, and the top-level ``type: object``."""
    problems = [
        document.problem(
            (*path, *error.instance_path),
            ProblemCode.INVALID_JSON_SCHEMA,
            f"invalid JSON Schema: {error.message}",
        )
        for error in _META.iter_errors(schema)
    ]
    for subschema, where in _subschemas(schema, path):
        for keyword in subschema:
            if keyword in _KEYWORDS or not isinstance(keyword, str):
                continue
            close = difflib.get_close_matches(keyword, _KEYWORDS, n=1, cutoff=0.8)
            if close:
                problems.append(
                    document.problem(
                        (*where, keyword),
                        ProblemCode.INVALID_JSON_SCHEMA,
                        f"unknown JSON Schema keyword {keyword!r}; did you mean {close[0]!r}?",
                        key=True,
                    )
                )
    if schema.get("type") != "object":
        problems.append(
            document.problem(
                (*path, "type"),
                ProblemCode.INVALID_JSON_SCHEMA,
                f"the {role} schema must have type: object"
                + (" (tool arguments are an object)" if role == "input" else ""),
                key="type" in schema,
            )
        )
    return problems
