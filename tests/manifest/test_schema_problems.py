"""A manifest's JSON Schema mistakes, checked by jsonschema-rs against the 2020-12 metaschema,
are reported at the field path and line where they are - each one, as they were when the
pure-Python ``jsonschema`` checked them (the paths below are what it reported)."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.manifest import ProblemCode
from tests.manifest.support import edited, line_of, problems, write

AMOUNT = "amount: {type: number}"

CASES = [
    ("amount: {type: numbr, minimum: 0}", ["spec.input.properties.amount.type"]),
    ("amount: {type: number, minimum: zero}", ["spec.input.properties.amount.minimum"]),
    (
        "amount: {type: number, enum: x, maxLength: -1}",
        ["spec.input.properties.amount.enum", "spec.input.properties.amount.maxLength"],
    ),
    ("amount: {type: number, required: amount}", [
        "spec.input.properties.amount.required"
    ]),
    ("amount: {type: number, items: {type: int}}", [
        "spec.input.properties.amount.items.type"
    ]),
    ("amount: {type: number, anyOf: []}", ["spec.input.properties.amount.anyOf"]),
    ("amount: {type: number, $ref: 5}", ["spec.input.properties.amount.$ref"]),
]  # fmt: skip


@pytest.mark.parametrize(("replacement", "paths"), CASES)
def test_every_metaschema_violation_is_reported_at_its_field_path_and_line(
    replacement: str, paths: list[str], tmp_path: Path
) -> None:
    text = edited(AMOUNT, replacement)
    write(tmp_path, "a.yaml", text)

    found = [p for p in problems(tmp_path) if p.code is ProblemCode.INVALID_JSON_SCHEMA]

    assert sorted({p.path for p in found}) == sorted(paths)
    assert {p.line for p in found} == {line_of(text, replacement)}
    assert all(p.message.startswith("invalid JSON Schema: ") for p in found)
