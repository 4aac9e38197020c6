"""`signoff check` catches what loads but does not mean what was written, and shows where."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.manifest import ProblemCode, load_manifests
from tests.manifest.support import column_of, edited, line_of, only_problem, write

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    return tmp_path / "manifests"


def test_a_value_yaml_split_at_a_comma_is_reported_at_the_stray_key(manifests: Path) -> None:
    text = edited(
        "amount: {type: number}",
        "amount: {type: number, description: The amount in EUR, as on the invoice.}",
    )
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.SPLIT_VALUE
    assert problem.path == "spec.input.properties.amount.as on the invoice."
    assert (problem.line, problem.column) == (line_of(text, "as on"), column_of(text, "as on"))
    assert '"The amount in EUR, as on the invoice."' in problem.message


def test_a_quoted_value_with_a_comma_and_a_key_written_without_value_are_fine(
    manifests: Path,
) -> None:
    text = edited(
        "amount: {type: number}",
        'amount: {type: number, description: "In EUR, as invoiced", x-internal: }',
    )
    write(manifests, "a.yaml", text)

    assert load_manifests(manifests).actions


def test_a_cel_comparison_of_a_number_with_a_string_is_a_type_error(manifests: Path) -> None:
    text = edited('when: "input.amount > 100000.0"', "when: \"input.amount > '50000'\"")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.CEL_TYPE_ERROR, "spec.policy.deny[0].when")
    assert problem.line == line_of(text, "'50000'")


def test_comparing_a_number_with_an_int_literal_is_not_a_type_error(manifests: Path) -> None:
    write(
        manifests, "a.yaml", edited('when: "input.amount > 100000.0"', 'when: "input.amount > 5"')
    )

    assert load_manifests(manifests).actions


def test_a_required_property_that_additional_properties_false_forbids_is_reported(
    manifests: Path,
) -> None:
    text = edited("required: [invoice_id, amount]", "required: [invoice_id, amount, currency]")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (
        ProblemCode.INVALID_JSON_SCHEMA,
        "spec.input.required[2]",
    )
    assert "'currency'" in problem.message


def test_an_http_status_mapped_to_an_undeclared_code_is_reported(manifests: Path) -> None:
    executor = (
        "  executor:\n"
        "    http:\n"
        "      url: http://127.0.0.1:9/invoices\n"
        "      status_codes: {409: INVOICE_ALREADY_PAID, 404: INVOICE_GONE}\n"
    )
    text = edited(
        "  executor:\n    python: tests.manifest.hooks:echo\n    timeout: 5s\n    idempotent: true\n",
        executor,
    )
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.UNDECLARED_CODE
    assert problem.path == "spec.executor.http.status_codes[404]"
    assert "INVOICE_GONE" in problem.message


def test_a_key_indented_one_space_too_far_names_its_line_with_a_hint(manifests: Path) -> None:
    text = edited("  risk: high\n", "   risk: high\n")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.YAML_SYNTAX
    assert (problem.line, problem.column) == (line_of(text, "risk: high"), 4)
    assert "indented 3 spaces" in problem.message and "same column" in problem.message


def test_a_key_indented_too_little_names_its_line_with_a_hint(manifests: Path) -> None:
    text = edited("      amount: {type: number}\n", "     amount: {type: number}\n")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.line == line_of(text, "amount: {type: number}")
    assert "indented 5 spaces" in problem.message


def test_a_key_without_a_colon_is_reported_on_its_own_line(manifests: Path) -> None:
    text = edited("  risk: high\n", "  risk high\n")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.line == line_of(text, "risk high")
    assert "needs ':'" in problem.message


def test_check_prints_the_source_line_with_a_caret_under_the_column(tmp_path: Path) -> None:
    text = edited("effect: write", "effect: wrte")
    write(tmp_path, "a.yaml", text)

    result = CliRunner().invoke(app, ["check", str(tmp_path)], env={"COLUMNS": "200"})

    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    number = line_of(text, "effect: wrte")
    source = next(i for i, line in enumerate(lines) if line.endswith("| " + "  effect: wrte"))
    assert lines[source].strip().startswith(f"{number} |")
    caret = lines[source + 1]
    assert caret.index("^") == lines[source].index("wrte")


def test_the_demo_manifests_have_no_lint_findings() -> None:
    assert len(load_manifests(DEMO_MANIFESTS).actions) == 4


def test_a_plain_value_with_a_colon_is_told_to_be_quoted(manifests: Path) -> None:
    text = edited("  title: Demo", "  title: Demo: now")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert problem.code is ProblemCode.YAML_SYNTAX
    assert (problem.line, problem.column) == (
        line_of(text, "Demo: now"),
        text.splitlines()[line_of(text, "Demo: now") - 1].rindex(":") + 1,
    )
    assert "must be quoted" in problem.message


def test_a_key_indented_into_the_mapping_above_is_named_with_where_it_belongs(
    manifests: Path,
) -> None:
    text = edited("  guard: tests", "    guard: tests")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert (problem.code, problem.path) == (ProblemCode.UNKNOWN_FIELD, "spec.approval.guard")
    assert problem.line == line_of(text, "    guard: tests")
    assert "field of spec: is it indented too far?" in problem.message
