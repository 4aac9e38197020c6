"""`signoff init DIR` starts a project that `signoff check DIR` passes as written, lists every
setting, and never overwrites anything."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff import ExecutionContext, Principal
from signoff.cli import app
from signoff.cli.init import TEMPLATES, project_files
from signoff.manifest import load_manifests, shipped_schema_text
from signoff.settings import env_file


def init(directory: Path) -> None:
    result = CliRunner().invoke(app, ["init", str(directory)])
    assert result.exit_code == 0, result.output


def test_init_writes_a_project_that_check_passes(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    init(project)

    checked = CliRunner().invoke(app, ["check", str(project)])

    assert checked.exit_code == 0, checked.output
    assert "4 of 4 test cases passed; the manifests are valid" in checked.output
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == sorted(
        project_files("shop")
    )


def test_the_project_holds_one_action_with_tests_and_the_current_schema(tmp_path: Path) -> None:
    init(tmp_path / "p")

    (action,) = load_manifests(tmp_path / "p" / "manifests").actions

    assert action.id == "refund.issue"
    assert len(action.manifest.tests) >= 3
    assert (tmp_path / "p" / "manifest.schema.json").read_text() == shipped_schema_text()


def test_the_env_file_is_the_settings_catalog(tmp_path: Path) -> None:
    init(tmp_path / "p")

    assert (tmp_path / "p" / "signoff.env").read_text() == env_file()


def test_init_never_overwrites_a_file(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "manifests").mkdir(parents=True)
    (project / "README.md").write_text("mine")

    result = CliRunner().invoke(app, ["init", str(project)])

    assert result.exit_code == 1
    assert result.output.strip().endswith("[INIT_WOULD_OVERWRITE]")
    assert (project / "README.md").read_text() == "mine"
    assert sorted(p.name for p in project.rglob("*")) == ["README.md", "manifests"]


def test_check_of_a_folder_with_manifests_of_its_own_checks_that_folder(tmp_path: Path) -> None:
    init(tmp_path / "p")
    (tmp_path / "p" / "broken.yaml").write_text("apiVersion: signoff/v1\nkind: Action\n")

    checked = CliRunner().invoke(app, ["check", str(tmp_path / "p")])

    assert checked.exit_code == 1  # not silently the manifests/ folder alone


def test_the_example_executor_issues_a_refund_once_per_operation_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "refunds/executors.py" in TEMPLATES
    ledger = tmp_path / "refunds.jsonl"
    monkeypatch.setenv("REFUNDS_LEDGER", str(ledger))
    executors = importlib.import_module("signoff.scaffold.refunds.executors")

    def context(operation: str) -> ExecutionContext:
        return ExecutionContext(
            run_id=operation.split(":")[0],
            action_id="refund.issue",
            tenant_id="acme",
            principal=Principal(id="agent-1", roles=("support",)),
            input={"order_id": "ORD-7", "amount": 25.0},
            resource="order/ORD-7",
            attempt_token=operation.split(":")[1],
            operation_id=operation,
        )

    first = executors.issue_refund(context("run-1:a"))
    again = executors.issue_refund(context("run-1:a"))
    other = executors.issue_refund(context("run-2:a"))

    assert first == again and first["status"] == "issued"
    assert other["refund_id"] != first["refund_id"]
    assert [json.loads(line)["operation_id"] for line in ledger.read_text().splitlines()] == [
        "run-1:a",
        "run-2:a",
    ]
