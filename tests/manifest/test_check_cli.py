"""`signoff check` and `signoff schema` through the real command line app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.manifest import manifest_json_schema
from tests.manifest.support import VALID, edited, line_of, write

ROOT = Path(__file__).resolve().parents[2]
WIDE = {"COLUMNS": "200"}


def test_the_demo_manifests_check_clean_with_a_table_and_passing_cases() -> None:
    result = CliRunner().invoke(app, ["check", str(DEMO_MANIFESTS)], env=WIDE)

    assert result.exit_code == 0, result.output
    for action in ("invoice.list", "invoice.get", "invoice.cancel", "invoice.send_reminder"):
        assert action in result.stdout
    assert "input.amount > 1000.0 -> 1 of billing-lead" in result.stdout
    assert "async python" in result.stdout
    assert result.stderr == ""


def test_the_directory_defaults_to_the_manifests_option(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", VALID)

    result = CliRunner().invoke(app, ["check", "--manifests", str(tmp_path)], env=WIDE)

    assert result.exit_code == 0, result.output
    assert "demo.act" in result.stdout


def test_an_invalid_set_exits_non_zero_listing_every_problem(tmp_path: Path) -> None:
    first = edited("effect: write", "effect: wrte")
    second = edited(
        "id: demo.act", "id: demo.b", edited('"input.amount < 0.0"', '"input.amount <"')
    )
    write(tmp_path, "a.yaml", first)
    write(tmp_path, "b.yaml", second)

    result = CliRunner().invoke(app, ["check", str(tmp_path)], env=WIDE)

    assert result.exit_code == 1
    assert f"a.yaml:{line_of(first, 'wrte')}:" in result.stderr
    assert "spec.effect" in result.stderr and "[INVALID_VALUE]" in result.stderr
    assert f"b.yaml:{line_of(second, 'input.amount <')}:" in result.stderr
    assert "spec.policy.deny[1].when" in result.stderr and "[INVALID_CEL]" in result.stderr
    assert "[MANIFEST_INVALID]" in result.stderr
    assert result.stdout == ""


def test_a_failing_test_case_exits_non_zero_and_names_it(tmp_path: Path) -> None:
    text = edited("    expect: SUCCEEDED", "    expect: APPROVAL_REQUIRED")
    write(tmp_path, "a.yaml", text)

    result = CliRunner().invoke(app, ["check", str(tmp_path)], env=WIDE)

    assert result.exit_code == 1
    assert f"a.yaml:{line_of(text, '- name: small amounts')}" in result.stderr
    assert "expected APPROVAL_REQUIRED, got SUCCEEDED" in result.stderr
    assert "[MANIFEST_TESTS_FAILED]" in result.stderr


def test_a_missing_directory_exits_non_zero(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["check", str(tmp_path / "nope")], env=WIDE)

    assert result.exit_code == 1
    assert "[NO_MANIFESTS]" in result.stderr


def test_schema_prints_the_manifest_json_schema() -> None:
    result = CliRunner().invoke(app, ["schema"])

    assert result.exit_code == 0
    assert json.loads(result.stdout) == manifest_json_schema()


def test_an_unknown_input_reference_in_an_http_template_names_file_line_and_field(
    tmp_path: Path,
) -> None:
    text = edited(
        "    python: tests.manifest.hooks:echo\n",
        "    http:\n      url: 'http://127.0.0.1:9/invoices/{{input.invoice}}'\n",
    )
    write(tmp_path, "a.yaml", text)

    result = CliRunner().invoke(app, ["check", str(tmp_path)], env=WIDE)

    assert result.exit_code == 1
    assert f"a.yaml:{line_of(text, 'url:')}:" in result.stderr
    assert "spec.executor.http.url: unknown input reference 'input.invoice'" in result.stderr
    assert "did you mean 'invoice_id'?" in result.stderr
