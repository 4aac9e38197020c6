"""`spec.limits` in manifests: loaded into the definition, mistakes located, shown by check."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from signoff.core.limits import LimitSpec, LimitSubject, OnExceed
from signoff.manifest import ProblemCode, load_manifests
from tests.manifest.support import VALID, edited, line_of, only_problem, write

LIMITS = """\
  limits:
    - name: daily-refunds
      per: principal
      window: 24h
      count: 5
      sum: input.amount
      max: 1000
    - name: tenant-hourly
      per: tenant
      window: 1h
      count: 50
      on_exceed: deny
"""


def with_limits(text: str = LIMITS) -> str:
    return edited("  sensitive: [note]\n", "  sensitive: [note]\n" + text)


def test_limits_are_loaded_into_the_definition_and_its_revision(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", with_limits())
    [action] = load_manifests(tmp_path, environ={}).actions
    definition = action.compiled.definition
    assert definition.limits == (
        LimitSpec(
            name="daily-refunds",
            per=LimitSubject.PRINCIPAL,
            window=timedelta(hours=24),
            count=5,
            sum="input.amount",
            max=1000.0,
        ),
        LimitSpec(
            name="tenant-hourly",
            per=LimitSubject.TENANT,
            window=timedelta(hours=1),
            count=50,
            on_exceed=OnExceed.DENY,
        ),
    )
    write(tmp_path, "a.yaml", VALID)
    [plain] = load_manifests(tmp_path, environ={}).actions
    assert plain.compiled.definition.revision() != definition.revision()


def test_a_sum_without_max_is_located(tmp_path: Path) -> None:
    text = with_limits(LIMITS.replace("      max: 1000\n", ""))
    write(tmp_path, "a.yaml", text)
    problem = only_problem(tmp_path)
    assert problem.code is ProblemCode.INVALID_VALUE
    assert problem.path == "spec.limits[0].sum"
    assert problem.line == line_of(text, "sum: input.amount")


def test_a_bad_cel_sum_is_located(tmp_path: Path) -> None:
    text = with_limits(LIMITS.replace("sum: input.amount", "sum: 'input.amount +'"))
    write(tmp_path, "a.yaml", text)
    problem = only_problem(tmp_path)
    assert problem.path == "spec.limits[0].sum"


def test_a_limit_without_a_bound_and_a_duplicate_name_are_refused(tmp_path: Path) -> None:
    text = with_limits(
        LIMITS.replace("      count: 50\n", "").replace("tenant-hourly", "daily-refunds")
    )
    write(tmp_path, "a.yaml", text)
    from tests.manifest.support import problems

    found = {(p.path, p.message) for p in problems(tmp_path)}
    assert ("spec.limits[1]", "a limit needs count and/or sum with max") in found
    assert ("spec.limits[1].name", "limit 'daily-refunds' twice") in found


def test_a_resource_limit_needs_a_resource_expression(tmp_path: Path) -> None:
    text = with_limits(LIMITS.replace("per: tenant", "per: resource"))
    text = edited("  resource: \"'invoice/' + input.invoice_id\"\n", "", text)
    text = edited("scope: resource", "scope: principal", text)
    write(tmp_path, "a.yaml", text)
    problem = only_problem(tmp_path)
    assert problem.path == "spec.limits[1].per"


def test_check_shows_each_limit_in_the_table(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", with_limits())
    result = CliRunner().invoke(app, ["check", str(tmp_path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "daily-refunds: 5 calls, sum input.amount <= 1000 per principal / 24h -> approval" in (
        result.stdout
    )
    assert "tenant-hourly: 50 calls per tenant / 1h -> deny" in result.stdout


CASES = """\
  - name: the sixth refund today waits for a human
    principal: {roles: [billing]}
    input: {invoice_id: INV-1, amount: 10.0}
    usage: {daily-refunds: {count: 5, sum: 100}}
    expect: APPROVAL_REQUIRED
  - name: exactly at the sum still runs
    principal: {roles: [billing]}
    input: {invoice_id: INV-1, amount: 100.0}
    usage: {daily-refunds: {count: 1, sum: 900}}
    expect: SUCCEEDED
  - name: the tenant's fifty-first call is refused
    principal: {roles: [billing]}
    input: {invoice_id: INV-1, amount: 1.0}
    usage: {tenant-hourly: {count: 50}}
    expect: LIMIT_EXCEEDED
"""


def test_cases_set_prior_usage_and_check_reports_them(tmp_path: Path) -> None:
    text = with_limits().replace("tests:\n", "tests:\n" + CASES)
    write(tmp_path, "a.yaml", text)
    result = CliRunner().invoke(app, ["check", str(tmp_path)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "4 of 4 test cases passed" in result.stdout
    assert "ok    demo.act: the sixth refund today waits for a human -> APPROVAL_REQUIRED" in (
        result.stdout
    )


def test_a_case_naming_an_unknown_limit_is_located(tmp_path: Path) -> None:
    text = with_limits().replace("tests:\n", "tests:\n" + CASES.replace("tenant-hourly:", "nope:"))
    write(tmp_path, "a.yaml", text)
    problem = only_problem(tmp_path)
    assert problem.code is ProblemCode.INVALID_TEST
    assert problem.path == "tests[2].usage.nope"


def test_a_case_expecting_the_wrong_limit_outcome_fails(tmp_path: Path) -> None:
    wrong = CASES.replace("expect: LIMIT_EXCEEDED", "expect: SUCCEEDED")
    write(tmp_path, "a.yaml", with_limits().replace("tests:\n", "tests:\n" + wrong))
    result = CliRunner().invoke(app, ["check", str(tmp_path)], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    assert "the tenant's fifty-first call is refused" in result.output
