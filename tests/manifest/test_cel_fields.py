"""`signoff check` resolves every field a CEL expression reads against the schema it reads from."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import cel
import pytest
from typer.testing import CliRunner

from signoff.app import load_registry
from signoff.cli import app
from signoff.manifest import ManifestProblem, ProblemCode, load_manifests
from signoff.manifest.cel_syntax import parse
from signoff.manifest.errors import Severity
from tests.manifest.support import column_of, edited, line_of, only_problem, problems, write

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN, UNDECLARED = ProblemCode.UNKNOWN_CEL_FIELD, ProblemCode.UNDECLARED_CEL_FIELD

# The demo manifest plus the fields these tests read: a priority, a customer, order lines.
BASE = edited(
    "      note: {type: string}\n",
    "      note: {type: string}\n"
    "      priority: {type: string, enum: [low, high]}\n"
    "      customer:\n"
    "        type: object\n"
    "        properties: {id: {type: string}, name: {type: string}}\n"
    "        additionalProperties: false\n"
    "      items:\n"
    "        type: array\n"
    "        items:\n"
    "          type: object\n"
    "          properties: {sku: {type: string}, qty: {type: integer}}\n"
    "          additionalProperties: false\n",
)
WHEN = 'when: "input.amount > 1000.0"'
CLOSED = "    required: [invoice_id, amount]\n    additionalProperties: false\n"


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    return tmp_path / "manifests"


def approval_when(expression: str, text: str = BASE) -> str:
    return edited(WHEN, f"when: {expression}", text)


def where(problem: ManifestProblem) -> tuple[ProblemCode, str, int | None, int | None]:
    return problem.code, problem.path, problem.line, problem.column


def at(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """The line and column of ``needle`` (plus ``offset`` characters) in ``text``."""
    return line_of(text, needle), column_of(text, needle) + offset


def test_an_approval_rule_behind_has_reading_a_misspelt_field_is_an_error(
    manifests: Path,
) -> None:
    # The case: accepted before, and approval was then silently never required.
    text = approval_when("\"has(input.prio) && input.prio == 'high'\"")
    write(manifests, "a.yaml", text)

    found = problems(manifests)

    assert [where(p) for p in found] == [
        (UNKNOWN, "spec.approval.when", *at(text, "prio)")),
        (UNKNOWN, "spec.approval.when", *at(text, "prio ==")),
    ]
    assert all("did you mean 'priority'?" in p.message for p in found)


def test_a_condition_reading_a_misspelt_field_is_an_error_not_a_failure_on_every_call(
    manifests: Path,
) -> None:
    text = approval_when("\"input.prio == 'high'\"")
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert where(problem) == (UNKNOWN, "spec.approval.when", *at(text, "prio =="))
    assert "'priority'" in problem.message


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        (
            "  resource: \"'invoice/' + input.invoice_id\"",
            "  resource: \"'invoice/' + input.invoice\"",
            "spec.resource",
        ),
        ('"input.amount > 100000.0"', '"input.amont > 100000.0"', "spec.policy.deny[0].when"),
        ('"input.amount > 1000.0"', '"input.amont > 1000.0"', "spec.approval.when"),
        (
            "    expires_after: 1h30m\n",
            '    expires_after: 1h30m\n    escalate:\n      - {when: "input.amont > 1.0", count: 3}\n',
            "spec.approval.escalate[0].when",
        ),
        (
            "  sensitive: [note]\n",
            "  sensitive: [note]\n  limits:\n"
            "    - {name: daily, window: 24h, sum: input.amont, max: 1000}\n",
            "spec.limits[0].sum",
        ),
    ],
)
def test_every_expression_of_a_manifest_is_checked(
    manifests: Path, old: str, new: str, path: str
) -> None:
    text = edited(old, new, BASE)
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    misspelt = 'invoice"' if path == "spec.resource" else "amont"
    assert where(problem) == (UNKNOWN, path, *at(text, misspelt))


@pytest.mark.parametrize(
    ("written", "needle"),
    [
        ("input.prio == 'high'", "prio =="),
        ("\"input['prio'] == 'high'\"", "'prio'"),
        ("\"\\\"a\\\" != 'b\\t\\u00e9' && input.prio == 'x'\"", "prio =="),
        ("'''a'' != \"b\" && input.prio == ''x'''", "prio =="),
        ("|\n      input.amount > 1.0 &&\n        input.prio == 'x'", "prio =="),
        (">-\n      input.amount > 1.0 &&\n\n      input.prio == 'x'", "prio =="),
        ("input.amount > 1.0 &&\n      input.prio == 'x'", "prio =="),
    ],
    ids=["plain", "index", "double-quoted", "single-quoted", "literal", "folded", "multi-line"],
)
def test_the_position_is_the_field_inside_the_expression_in_every_yaml_style(
    manifests: Path, written: str, needle: str
) -> None:
    text = approval_when(written)
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert where(problem) == (UNKNOWN, "spec.approval.when", *at(text, needle))


@pytest.mark.parametrize(
    "expression",
    [
        "\"'input.prio' != input.priority\"",
        "\"input.customer.name != '' && has(input.customer.id)\"",
        "\"input.items[0].sku != '' && input.items.all(i, i.qty > 0 && i.sku != '')\"",
        '"size(input.items.filter(i, i.qty > 2)) > 0 && input.items[input.amount > 1.0 ? 0 : 1].qty > 1"',
        "\"'billing' in principal.roles && principal.id != '' && tenant != '' && resource != ''\"",
        "\"proposer.type == 'agent' && proposer.channel == 'mcp' && action.risk == 'high'\"",
        "\"action.id != '' && action.effect == 'write' && now.getHours() >= 0\"",
        "\"principal.roles.exists(input, input == 'x') && input.amount > 1.0\"",
        "\"{'prio': input.amount}['prio'] > 1.0 // input.prio in a comment\"",
    ],
)
def test_expressions_reading_only_declared_fields_load_without_warnings(
    manifests: Path, expression: str
) -> None:
    write(manifests, "a.yaml", approval_when(expression))

    loaded = load_manifests(manifests, environ={})

    assert (len(loaded.actions), loaded.warnings) == (1, ())


@pytest.mark.parametrize(
    ("expression", "needle", "suggested"),
    [
        ("\"input.customer.nmae == 'x'\"", "nmae", "name"),
        ("\"input.items[0].skuu == 'x'\"", "skuu", "sku"),
        ('"input.items.exists(i, i.qtty > 1)"', "qtty", "qty"),
        (
            "\"input.items.all(i, i.sku != '') && input.items.exists(j, j.sk == '')\"",
            "sk ==",
            "sku",
        ),
        ("\"principal.role == 'x'\"", "role ==", "roles"),
        ("\"proposer.typ == 'agent'\"", "typ ==", "type"),
        ("\"action.risc == 'high'\"", "risc", "risk"),
    ],
)
def test_a_misspelt_field_of_a_nested_object_an_element_or_a_variable_is_an_error(
    manifests: Path, expression: str, needle: str, suggested: str
) -> None:
    text = approval_when(expression)
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert where(problem) == (UNKNOWN, "spec.approval.when", *at(text, needle))
    assert f"did you mean {suggested!r}?" in problem.message


@pytest.mark.parametrize(
    ("expression", "needle"),
    [
        ("\"input.amount.currency == 'EUR'\"", "currency"),
        ("\"input.items.sku == 'x'\"", "sku =="),
        ("\"input.items.exists(i, i.sku.code == 'x')\"", "code =="),
        ("\"tenant.name == 'acme'\"", "name =="),
        ('"now.hour > 8"', "hour"),
    ],
)
def test_a_field_of_a_value_that_is_not_an_object_is_an_error(
    manifests: Path, expression: str, needle: str
) -> None:
    text = approval_when(expression)
    write(manifests, "a.yaml", text)

    assert where(only_problem(manifests)) == (UNKNOWN, "spec.approval.when", *at(text, needle))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (CLOSED, "    required: [invoice_id, amount]\n"),
        (CLOSED, CLOSED.replace("false", "true")),
        (CLOSED, CLOSED.replace("false", "{type: string}")),
        (CLOSED, CLOSED.replace("additionalProperties: false", "patternProperties: {'^x_': {}}")),
    ],
    ids=["absent", "true", "a-schema", "pattern-properties"],
)
def test_a_field_an_open_schema_does_not_declare_is_a_warning_and_the_manifest_loads(
    manifests: Path, old: str, new: str
) -> None:
    text = edited(old, new, approval_when("\"has(input.prio) || input.x_a == 'y'\""))
    write(manifests, "a.yaml", text)

    loaded = load_manifests(manifests, environ={})

    [warning, *more] = loaded.warnings
    assert (warning.severity, *where(warning)) == (
        Severity.WARNING, UNDECLARED, "spec.approval.when", *at(text, "prio)"),
    )  # fmt: skip
    assert "'priority'" in warning.message
    assert len(more) == (0 if "patternProperties" in new else 1)  # x_a matches the pattern


def test_a_field_a_closed_schema_matches_by_pattern_only_is_declared(manifests: Path) -> None:
    text = edited(
        CLOSED,
        CLOSED.replace(
            "    additionalProperties",
            "    patternProperties: {'^x_': {}}\n    additionalProperties",
        ),
        approval_when("\"input.x_a == 'y' || input.prio == 'z'\""),
    )
    write(manifests, "a.yaml", text)

    assert where(only_problem(manifests)) == (UNKNOWN, "spec.approval.when", *at(text, "prio =="))


def test_a_nested_object_without_additional_properties_false_gives_a_warning(
    manifests: Path,
) -> None:
    text = edited(
        "        properties: {id: {type: string}, name: {type: string}}\n"
        "        additionalProperties: false\n",
        "        properties: {id: {type: string}, name: {type: string}}\n",
        approval_when("\"input.customer.nmae == 'x'\""),
    )
    write(manifests, "a.yaml", text)

    (warning,) = load_manifests(manifests, environ={}).warnings

    assert where(warning) == (UNDECLARED, "spec.approval.when", *at(text, "nmae"))


def test_fields_declared_through_a_local_ref_and_all_of_are_resolved(manifests: Path) -> None:
    text = edited(
        "      note: {type: string}\n",
        "      note: {type: string}\n"
        "      payee: {$ref: '#/$defs/party'}\n"
        "    allOf: [{properties: {region: {type: string}}}]\n"
        "    $defs:\n"
        "      party:\n"
        "        type: object\n"
        "        properties: {iban: {type: string}}\n"
        "        additionalProperties: false\n",
        approval_when("\"input.payee.iban != '' && input.region != '' && input.payee.ibn != ''\""),
    )
    write(manifests, "a.yaml", text)

    problem = only_problem(manifests)

    assert where(problem) == (UNKNOWN, "spec.approval.when", *at(text, "ibn"))


def test_a_manifest_with_warnings_checks_clean_and_prints_them(tmp_path: Path) -> None:
    text = edited(
        CLOSED,
        "    required: [invoice_id, amount]\n",
        approval_when("\"has(input.prio) && input.prio == 'high'\""),
    )
    write(tmp_path, "a.yaml", text)

    result = CliRunner().invoke(app, ["check", str(tmp_path)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    line, column = at(text, "prio)")
    assert f"a.yaml:{line}:{column}: warning: spec.approval.when:" in result.stderr
    assert result.stderr.count("[UNDECLARED_CEL_FIELD]") == 2
    assert "the manifests are valid (2 warnings)" in result.stdout


def test_errors_and_warnings_are_printed_together_when_the_set_is_invalid(tmp_path: Path) -> None:
    text = edited(
        CLOSED,
        "    required: [invoice_id, amount]\n",
        approval_when("\"has(input.prio) && principal.role == 'x'\""),
    )
    write(tmp_path, "a.yaml", text)

    result = CliRunner().invoke(app, ["check", str(tmp_path)], env={"COLUMNS": "200"})

    assert result.exit_code == 1
    assert "[UNKNOWN_CEL_FIELD]" in result.stderr and "[UNDECLARED_CEL_FIELD]" in result.stderr
    assert "1 problem in 1 file (1 warning); the manifests were not loaded" in result.stderr


def test_the_server_logs_each_warning_when_it_loads_the_manifests(
    manifests: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = edited(CLOSED, "    required: [invoice_id, amount]\n", approval_when(
        "\"input.prio == 'high'\""
    ))  # fmt: skip
    write(manifests, "a.yaml", text)

    with caplog.at_level(logging.WARNING, logger="signoff"):
        registry = load_registry(manifests)

    assert [action.id for action in registry.all()] == ["demo.act"]
    assert [r.getMessage() for r in caplog.records if "UNDECLARED_CEL_FIELD" in r.getMessage()]


_CEL_LINE = re.compile(r"""(?:when|sum|resource):\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)')""")


def test_every_expression_written_in_the_repository_is_one_the_reader_understands() -> None:
    # The field checks skip what the reader cannot parse: nothing the project ships may be that.
    pages = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("src/**/*.yaml")]
    pages += [*ROOT.glob("tests/**/*.yaml"), *ROOT.glob("tests/**/*.py")]
    written = {
        double.replace('\\"', '"') if double else single.replace("''", "'")
        for page in pages
        for double, single in _CEL_LINE.findall(page.read_text(encoding="utf-8"))
        if "input" in (double or single)
    }
    expressions = [text for text in written if _compiles(text)]

    assert len(expressions) > 5
    for expression in expressions:
        parse(expression)


def _compiles(text: str) -> bool:
    try:
        cel.compile(text)
    except Exception:
        return False
    return True
