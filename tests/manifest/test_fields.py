"""One resolver says which fields a JSON Schema declares, for CEL, templates and pointers alike."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from signoff.core.definition import ActionDefinition
from signoff.core.identity import Channel, Principal, ProposerType
from signoff.core.policy import CEL_VARIABLE_SCHEMAS, CEL_VARIABLES, PolicyInput, cel_variables
from signoff.core.registry import compile_action
from signoff.manifest import ProblemCode
from signoff.manifest.fields import ELEMENT, Found, Missing, NotObject, resolve
from tests.manifest.support import edited, only_problem, write

CLOSED = {"additionalProperties": False}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "priority": {"type": "string"},
        "amount": {"type": ["number", "null"]},
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"sku": {"type": "string"}}, **CLOSED},
        },
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"$ref": "#/$defs/p"}]},
        "meta": {"type": "object"},
    },
    "$defs": {"p": {"type": "object", "properties": {"x": {}}, **CLOSED}},
    **CLOSED,
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("priority",), Found({"type": "string"})),
        (("prio",), Missing(0, "prio", ("amount", "items", "meta", "pair", "priority"), None)),
        (("amount", "cents"), NotObject(1, "a number or null")),
        (("items", 0, "sku"), Found({"type": "string"})),
        (("items", ELEMENT, "sku"), Found({"type": "string"})),
        (("items", None, "sku"), Found({"type": "string"})),
        (("items", "3", "sku"), Found({"type": "string"})),  # a template's items.3
        (("items", 0, "skuu"), Missing(2, "skuu", ("sku",), None)),
        (("items", "sku"), NotObject(1, "an array")),
        (("pair", 1, "x"), Found({})),
        (("pair", 1, "y"), Missing(2, "y", ("x",), None)),
        (
            ("meta", "anything"),
            Missing(
                1, "anything", (), "it declares no fields (and no additionalProperties: false)"
            ),
        ),
        (("meta", None, "deeper"), Found(None)),  # a dynamic key of a free-form object
    ],
)
def test_a_path_resolves_to_its_schema_or_to_why_it_cannot_be_there(
    path: tuple[Any, ...], expected: object
) -> None:
    assert resolve(SCHEMA, path) == expected


def _obj(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", **keywords}


@pytest.mark.parametrize(
    ("schema", "closed"),
    [
        (_obj(properties={"a": {}}, **CLOSED), True),
        (_obj(properties={"a": {}}, unevaluatedProperties=False), True),
        (_obj(properties={"a": {}}), False),
        (_obj(properties={"a": {}}, additionalProperties=True), False),
        (_obj(properties={"a": {}}, additionalProperties={"type": "string"}), False),
        (_obj(allOf=[_obj(properties={"a": {}}, **CLOSED)]), True),  # one conjunct closes it
        (_obj(allOf=[_obj(properties={"a": {}})]), False),
        (_obj(anyOf=[_obj(**CLOSED), _obj(properties={"a": {}}, **CLOSED)]), True),
        (_obj(anyOf=[_obj(**CLOSED), _obj(properties={"a": {}})]), False),  # one branch is open
        (_obj(oneOf=[{"type": "string"}, _obj(**CLOSED)]), True),
        (_obj(patternProperties={"^x": {}}, **CLOSED), True),
        (_obj(patternProperties={"^c": {}}), False),
        (_obj(patternProperties={"(?<=x)+[": {}}, **CLOSED), True),
        (_obj(patternProperties={"(?<=x)+[": {}}), False),  # a pattern Python cannot read
        ({"$ref": "#/$defs/c", "$defs": {"c": _obj(**CLOSED)}}, True),
        ({"$ref": "https://example.com/schema.json"}, False),  # not followed: cannot tell
        ({"$ref": "#/$defs/missing"}, False),
        (_obj(properties={"a": {}}, then=_obj(properties={"c": {}}, **CLOSED)), False),
    ],
)
def test_an_undeclared_field_is_forbidden_only_where_the_schema_closes_the_object(
    schema: dict[str, Any], closed: bool
) -> None:
    resolution = resolve(schema, ("b",))

    assert isinstance(resolution, Missing)
    assert (resolution.open is None) is closed


@pytest.mark.parametrize(
    "schema",
    [
        _obj(allOf=[_obj(properties={"b": {"type": "string"}})], **CLOSED),
        _obj(anyOf=[_obj(properties={"b": {"type": "string"}}, **CLOSED), _obj(**CLOSED)]),
        _obj(properties={"a": {}}, then=_obj(properties={"b": {"type": "string"}}), **CLOSED),
        _obj(dependentSchemas={"a": _obj(properties={"b": {"type": "string"}})}, **CLOSED),
        _obj(patternProperties={"^b$": {"type": "string"}}, **CLOSED),
        {"$ref": "#/$defs/c", "$defs": {"c": _obj(properties={"b": {"type": "string"}})}},
    ],
)
def test_a_field_declared_in_any_branch_is_declared(schema: dict[str, Any]) -> None:
    assert resolve(schema, ("b",)) == Found({"type": "string"})


def test_a_ref_cycle_ends_without_an_answer_it_cannot_give() -> None:
    schema = {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}}

    resolution = resolve(schema, ("x",))

    assert isinstance(resolution, Missing) and resolution.open is not None


def test_the_declared_shape_of_each_cel_variable_is_what_the_policy_passes() -> None:
    action = compile_action(
        ActionDefinition(
            id="demo.act",
            effect="write",
            risk="high",
            input_schema={"type": "object"},
            executor=lambda context: {},
        )
    )
    request = PolicyInput(
        principal=Principal(id="p", roles=("r",)),
        tenant_id="t",
        proposer_type=ProposerType.AGENT,
        channel=Channel.MCP,
        input={"a": 1},
        now=datetime(2026, 1, 1, tzinfo=UTC),
    )

    variables = cel_variables(action, request, "res")

    assert list(variables) == list(CEL_VARIABLES)
    assert set(CEL_VARIABLE_SCHEMAS) == set(CEL_VARIABLES) - {"input"}
    kinds = {"object": dict, "string": str, "array": list, "timestamp": datetime}
    for name, schema in CEL_VARIABLE_SCHEMAS.items():
        assert isinstance(variables[name], kinds[schema["type"]]), name
        if schema["type"] == "object":
            assert set(variables[name]) == set(schema["properties"]), name
            for field, value in variables[name].items():
                assert isinstance(value, kinds[schema["properties"][field]["type"]]), field


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    return tmp_path / "manifests"


@pytest.mark.parametrize(
    ("old", "new", "path", "suggested"),
    [
        ("sensitive: [note]", "sensitive: [note, amont]", "spec.sensitive[1]", "amount"),
        ("sensitive: [note]", "sensitive: [/input/amont]", "spec.sensitive[0]", "amount"),
        (
            "sensitive: [note]",
            "sensitive: [note]\n  display: {amont: {format: number}}",
            "spec.display.amont",
            "amount",
        ),
        (
            "    expires_after: 1h30m\n",
            "    expires_after: 1h30m\n    amend: [amont]\n",
            "spec.approval.amend[0]",
            "amount",
        ),
    ],
)
def test_a_misspelt_input_name_outside_cel_is_reported_with_a_did_you_mean(
    manifests: Path, old: str, new: str, path: str, suggested: str
) -> None:
    write(manifests, "a.yaml", edited(old, new))

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, path)
    assert f"did you mean {suggested!r}?" in problem.message


def test_a_sensitive_pointer_into_a_nested_input_value_must_resolve(manifests: Path) -> None:
    text = edited(
        "      note: {type: string}\n",
        "      note: {type: string}\n"
        "      payee:\n"
        "        type: object\n"
        "        properties: {iban: {type: string}}\n"
        "        additionalProperties: false\n",
        edited("sensitive: [note]", "sensitive: [note, /input/payee/iban, /input/payee/ibna]"),
    )
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, "spec.sensitive[2]")
    assert "did you mean 'iban'?" in problem.message


@pytest.mark.parametrize(
    ("sensitive", "amended"),
    [
        ("sensitive: [note]", "note"),
        ("sensitive: [/input/note]", "note"),
        ("sensitive: [/input/payee/iban]", "payee"),
    ],
)
def test_a_sensitive_field_cannot_be_amended_however_the_pointer_is_written(
    manifests: Path, sensitive: str, amended: str
) -> None:
    """Its before and after would be chained in the amending event, which a receipt and an
    export carry whole."""
    text = edited(
        "      note: {type: string}\n",
        "      note: {type: string}\n"
        "      payee:\n"
        "        type: object\n"
        "        properties: {iban: {type: string}}\n"
        "        additionalProperties: false\n",
        edited(
            "    expires_after: 1h30m\n",
            f"    expires_after: 1h30m\n    amend: [{amended}]\n",
            edited("sensitive: [note]", sensitive),
        ),
    )
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, "spec.approval.amend[0]")
    assert "is sensitive" in problem.message
