"""Every kind of manifest mistake names its file, line and field path, with a stable code."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.manifest import ProblemCode, load_manifest_dir
from tests.manifest.support import (
    VALID,
    column_of,
    edited,
    line_of,
    only_problem,
    problems,
    write,
)


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    return tmp_path / "manifests"


def test_a_yaml_syntax_error_names_the_file_and_line(manifests: Path) -> None:
    text = edited("  risk: high\n", "  risk: [high\n")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.YAML_SYNTAX
    assert Path(problem.file).name == "a.yaml"
    assert problem.line is not None and problem.line > line_of(text, "risk: [high")


def test_a_key_given_twice_is_reported_at_the_second_one(manifests: Path) -> None:
    text = edited("  risk: high\n", "  risk: high\n  risk: low\n")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.DUPLICATE_KEY
    assert (problem.line, problem.path) == (line_of(text, "risk: low"), "spec.risk")


def test_an_unknown_field_is_located_and_the_close_spelling_suggested(manifests: Path) -> None:
    text = edited("  resource:", "  resorce:")
    write(manifests, "a.yaml", text)

    found = problems(manifests)

    unknown = [p for p in found if p.code is ProblemCode.UNKNOWN_FIELD]
    assert len(unknown) == 1
    assert (unknown[0].line, unknown[0].column) == (line_of(text, "resorce:"), 3)
    assert unknown[0].path == "spec.resorce"
    assert "'resource'" in unknown[0].message
    # Without the resource expression the resource scope cannot work either: both are reported.
    assert {p.code for p in found} == {ProblemCode.UNKNOWN_FIELD, ProblemCode.INVALID_VALUE}


def test_an_unknown_field_deep_in_a_list_has_an_indexed_path(manifests: Path) -> None:
    text = edited("        code: NEGATIVE_AMOUNT", "        cod: NEGATIVE_AMOUNT")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.UNKNOWN_FIELD
    assert problem.path == "spec.policy.deny[1].cod"
    assert problem.line == line_of(text, "cod: NEGATIVE")


def test_a_missing_required_field_points_at_its_parent(manifests: Path) -> None:
    text = edited("  risk: high\n", "")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.MISSING_FIELD
    assert (problem.path, problem.line) == ("spec.risk", line_of(text, "spec:"))


def test_a_value_of_the_wrong_type_is_located(manifests: Path) -> None:
    text = edited("count: 2", 'count: "2"')
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.WRONG_TYPE
    assert problem.path == "spec.approval.approvers.count"
    assert (problem.line, problem.column) == (line_of(text, "count:"), column_of(text, '"2"'))


def test_a_condition_of_the_wrong_type_is_reported_once(manifests: Path) -> None:
    text = edited('"input.amount > 1000.0"', "1000")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.WRONG_TYPE, "spec.approval.when")


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ("effect: write", "effect: writes", "spec.effect"),
        ("expires_after: 1h30m", "expires_after: 90 minutes", "spec.approval.expires_after"),
        ("code: AMOUNT_OVER_LIMIT", "code: amount-over-limit", "spec.policy.deny[0].code"),
        ("id: demo.act", "id: Demo Act", "metadata.id"),
        (
            "python: tests.manifest.hooks:echo",
            "python: tests/manifest/hooks.py",
            "spec.executor.python",
        ),
        ("roles: [billing]\n", "roles: []\n", "spec.policy.roles"),
        ("INVOICE_ALREADY_PAID:", "invoice_paid:", "spec.results.invoice_paid"),
    ],
)
def test_an_invalid_value_is_located(manifests: Path, old: str, new: str, path: str) -> None:
    text = edited(old, new)
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, path)
    assert problem.line == line_of(text, new.strip().split("\n")[0])


def test_bad_cel_is_reported_at_its_column(manifests: Path) -> None:
    text = edited('"input.amount < 0.0"', '"input.amount <"')
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.INVALID_CEL
    assert problem.path == "spec.policy.deny[1].when"
    assert Path(problem.file).name == "a.yaml"
    # The parser stops at the end of the expression: just after "<", where the closing quote is.
    closing_quote = column_of(text, '"input.amount <"') + len('"input.amount <')
    assert (problem.line, problem.column) == (line_of(text, "input.amount <"), closing_quote)


def test_bad_cel_in_a_block_scalar_is_reported_on_its_own_line(manifests: Path) -> None:
    text = edited(
        '    when: "input.amount > 1000.0"\n',
        "    when: |\n      input.amount > 1000.0 &&\n        input.note ==\n",
    )
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_CEL, "spec.approval.when")
    end_of_expression = column_of(text, "input.note ==") + len("input.note ==")
    assert (problem.line, problem.column) == (line_of(text, "input.note =="), end_of_expression)


def test_a_misspelt_cel_variable_is_reported_with_its_position(manifests: Path) -> None:
    text = edited("\"'invoice/' + input.invoice_id\"", "\"'invoice/' + inptu.invoice_id\"")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.UNKNOWN_CEL_VARIABLE, "spec.resource")
    assert (problem.line, problem.column) == (line_of(text, "inptu"), column_of(text, "inptu"))
    assert "'input'" in problem.message


def test_comprehension_variables_are_not_unknown(manifests: Path) -> None:
    text = edited(
        '"input.amount > 1000.0"',
        "\"principal.roles.exists(r, r == 'intern') || input.amount > 1000.0\"",
    )
    write(manifests, "a.yaml", text)

    assert len(load_manifest_dir(manifests, environ={})) == 1


def test_an_invalid_json_schema_is_located_inside_the_input(manifests: Path) -> None:
    text = edited("amount: {type: number}", "amount: {type: numbr}")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.INVALID_JSON_SCHEMA
    assert problem.path == "spec.input.properties.amount.type"
    assert (problem.line, problem.column) == (line_of(text, "numbr"), column_of(text, "numbr"))


def test_a_misspelt_json_schema_keyword_is_reported(manifests: Path) -> None:
    text = edited("    additionalProperties: false", "    additionalProperty: false")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.INVALID_JSON_SCHEMA
    assert problem.path == "spec.input.additionalProperty"
    assert problem.line == line_of(text, "additionalProperty:")


def test_the_input_schema_must_describe_an_object(manifests: Path) -> None:
    text = edited("    type: object\n", "    type: array\n")
    write(manifests, "a.yaml", text)

    found = problems(manifests)

    assert {(p.code, p.path) for p in found} >= {
        (ProblemCode.INVALID_JSON_SCHEMA, "spec.input.type")
    }


@pytest.mark.parametrize(
    ("reference", "path"),
    [
        ("tests.manifest.no_such_module:echo", "spec.executor.python"),
        ("tests.manifest.hooks:no_such_function", "spec.executor.python"),
        ("tests.manifest.hooks:NOT_CALLABLE", "spec.executor.python"),
        ("tests.manifest.hooks:two_arguments", "spec.executor.python"),
    ],
)
def test_an_unimportable_executor_is_located(manifests: Path, reference: str, path: str) -> None:
    text = edited("python: tests.manifest.hooks:echo", f"python: {reference}")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.UNIMPORTABLE_HOOK, path)
    assert problem.line == line_of(text, reference)


def test_an_unimportable_guard_is_located(manifests: Path) -> None:
    text = edited("guard: tests.manifest.hooks:allow", "guard: tests.manifest.hooks:alow")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.UNIMPORTABLE_HOOK, "spec.guard")
    assert problem.line == line_of(text, "hooks:alow")


def test_an_executor_needs_python_or_http_but_not_both(manifests: Path) -> None:
    neither = edited("    python: tests.manifest.hooks:echo\n", "")
    both = edited(
        "    python: tests.manifest.hooks:echo\n",
        "    python: tests.manifest.hooks:echo\n    http: {url: 'http://127.0.0.1:9/'}\n",
    )
    write(manifests / "one", "a.yaml", neither)
    write(manifests / "two", "b.yaml", both)

    first, second = only_problem(manifests / "one"), only_problem(manifests / "two")

    assert (first.code, first.path) == (ProblemCode.MISSING_FIELD, "spec.executor")
    assert (second.code, second.path) == (ProblemCode.INVALID_VALUE, "spec.executor.http")
    assert second.line == line_of(both, "http:")


def test_resource_scope_without_a_resource_expression_is_an_error(manifests: Path) -> None:
    text = edited("  resource: \"'invoice/' + input.invoice_id\"\n", "")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, "spec.idempotency.scope")
    assert problem.line == line_of(text, "idempotency:")


def test_a_sensitive_field_must_be_an_input_property(manifests: Path) -> None:
    text = edited("sensitive: [note]", "sensitive: [note, iban]")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, "spec.sensitive[1]")


@pytest.mark.parametrize("entry", ["/input/iban", "/secret/note", "/output"])
def test_a_sensitive_pointer_must_name_an_input_property_or_point_into_the_output(
    manifests: Path, entry: str
) -> None:
    write(manifests, "a.yaml", edited("sensitive: [note]", f"sensitive: [note, '{entry}']"))

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, "spec.sensitive[1]")


def test_sensitive_pointers_into_input_and_output_load(manifests: Path) -> None:
    write(
        manifests,
        "a.yaml",
        edited("sensitive: [note]", "sensitive: [note, /input/note, /output/account/iban]"),
    )

    (action,) = load_manifest_dir(manifests)

    assert action.definition.sensitive_fields == ("note", "/input/note", "/output/account/iban")


def test_a_test_case_must_expect_a_code_decided_before_execution(manifests: Path) -> None:
    text = edited("    expect: SUCCEEDED", "    expect: INVOICE_ALREADY_PAID")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_TEST, "tests[0].expect")
    assert problem.line == line_of(text, "expect: INVOICE_ALREADY_PAID")


def test_the_same_action_id_in_two_files_is_an_error_at_the_second(manifests: Path) -> None:
    write(manifests, "a.yaml", VALID)
    write(manifests, "b.yaml", VALID)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.DUPLICATE_ACTION_ID
    assert (Path(problem.file).name, problem.path) == ("b.yaml", "metadata.id")
    assert problem.line == line_of(VALID, "id: demo.act")


def test_two_ids_that_map_to_one_tool_name_are_an_error_naming_both_files(
    manifests: Path,
) -> None:
    write(manifests, "a.yaml", VALID)
    write(manifests, "b.yaml", edited("id: demo.act", "id: demo_act"))

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.TOOL_NAME_COLLISION
    assert (Path(problem.file).name, problem.path) == ("b.yaml", "metadata.id")
    assert "a.yaml" in problem.message and "demo_act" in problem.message


def test_a_document_that_is_not_a_mapping_is_an_error(manifests: Path) -> None:
    text = VALID + "---\n- just a list\n"
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.WRONG_TYPE
    assert problem.line == line_of(text, "- just a list")


def test_a_directory_without_manifests_is_an_error(manifests: Path) -> None:
    manifests.mkdir()
    write(manifests, "notes.txt", "not a manifest")

    assert only_problem(manifests).code is ProblemCode.NO_MANIFESTS
    assert only_problem(manifests / "missing").code is ProblemCode.NO_MANIFESTS


def test_every_error_of_every_file_is_reported_in_one_run(manifests: Path) -> None:
    first = edited("effect: write", "effect: wrte", edited("count: 2", "count: two"))
    second = edited(
        "python: tests.manifest.hooks:echo",
        "python: tests.manifest.nothing:echo",
        edited('"input.amount < 0.0"', '"input.amount <"', edited("id: demo.act", "id: demo.b")),
    )
    third = "apiVersion: signoff/v1\nkind: Action\nmetadata: {id: demo.c\n"
    write(manifests, "a.yaml", first)
    write(manifests, "b.yaml", second)
    write(manifests / "nested", "c.yml", third)

    found = problems(manifests)

    assert {(Path(p.file).name, p.code, p.path) for p in found} == {
        ("a.yaml", ProblemCode.INVALID_VALUE, "spec.effect"),
        ("a.yaml", ProblemCode.WRONG_TYPE, "spec.approval.approvers.count"),
        ("b.yaml", ProblemCode.INVALID_CEL, "spec.policy.deny[1].when"),
        ("b.yaml", ProblemCode.UNIMPORTABLE_HOOK, "spec.executor.python"),
        ("c.yml", ProblemCode.YAML_SYNTAX, ""),
    }
    assert all(p.line is not None for p in found)


def test_hidden_files_and_other_extensions_are_ignored(manifests: Path) -> None:
    write(manifests, "a.yaml", VALID)
    write(manifests / ".trash", "old.yaml", "not: [valid")
    write(manifests, "README.md", "# notes")

    assert [action.id for action in load_manifest_dir(manifests, environ={})] == ["demo.act"]
