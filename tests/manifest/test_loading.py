"""What a valid manifest turns into: definition fields, defaults, environment, imports, schema."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import jsonschema_rs
import pytest
import yaml

from signoff import ApprovalSpec, ExecutorMode
from signoff.core.definition import OrphanPolicy
from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.manifest import (
    HttpExecutor,
    ProblemCode,
    load_manifest_dir,
    load_manifests,
    manifest_json_schema,
    shipped_schema_text,
)
from signoff.manifest.env import substitute
from tests.manifest import hooks
from tests.manifest.support import VALID, edited, line_of, only_problem, write

ROOT = Path(__file__).resolve().parents[2]
HTTP_EXECUTOR = """\
  executor:
    http:
      url: "${ERP_URL:-http://127.0.0.1:9}/invoices/${TENANT_PATH}"
      method: PUT
      timeout: 250ms
      headers:
        Authorization: "Bearer ${ERP_TOKEN}"
        X-Plain: "no variables, $$ literal"
      status_codes: {404: INVOICE_NOT_FOUND, 503: ERP_DOWN}
    idempotent: true
"""


def _with_http() -> str:
    """VALID with the HTTP executor, its mapped codes declared in spec.results."""
    text = edited(PYTHON_EXECUTOR, HTTP_EXECUTOR)
    declared = "    INVOICE_NOT_FOUND: {status: FAILED}\n    ERP_DOWN: {status: FAILED}\n"
    return edited("  results:\n", "  results:\n" + declared, text)


PYTHON_EXECUTOR = """\
  executor:
    python: tests.manifest.hooks:echo
    timeout: 5s
    idempotent: true
"""


def test_every_manifest_field_reaches_the_definition(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", VALID)

    (action,) = load_manifest_dir(tmp_path, environ={})
    definition = action.definition

    assert definition.id == "demo.act"
    assert (definition.effect, definition.risk) == ("write", "high")
    assert definition.input_schema["required"] == ["invoice_id", "amount"]
    assert definition.resource == "'invoice/' + input.invoice_id"
    assert (definition.idempotency.key, definition.idempotency.scope) == ("required", "resource")
    assert definition.policy.roles == ("billing",)
    assert [rule.code for rule in definition.policy.deny] == [
        "AMOUNT_OVER_LIMIT",
        "NEGATIVE_AMOUNT",
    ]
    assert definition.approval == ApprovalSpec(
        when="input.amount > 1000.0",
        approver_roles=("billing-lead",),
        count=2,
        expires_after=timedelta(hours=1, minutes=30),
    )
    assert definition.guard is hooks.allow
    assert definition.executor is hooks.echo
    assert definition.mode is ExecutorMode.SYNC
    assert definition.timeout == timedelta(seconds=5)
    assert definition.executor_idempotent is True
    assert definition.results["INVOICE_ALREADY_PAID"].retry == "NEVER"
    assert definition.sensitive_fields == ("note",)
    assert definition.source == f"{path}:1"


def test_an_omitted_approval_block_is_the_contracts_safe_default(tmp_path: Path) -> None:
    start = VALID.index("  approval:")
    end = VALID.index("  guard:")
    write(tmp_path, "a.yaml", VALID[:start] + VALID[end:])

    (action,) = load_manifest_dir(tmp_path, environ={})

    assert action.definition.approval == ApprovalSpec()


@pytest.mark.parametrize(("literal", "expected"), [("false", "false"), ("true", "true")])
def test_an_unquoted_boolean_condition_is_the_cel_literal(
    tmp_path: Path, literal: str, expected: str
) -> None:
    write(tmp_path, "a.yaml", edited('when: "input.amount > 1000.0"', f"when: {literal}"))

    (action,) = load_manifest_dir(tmp_path, environ={})

    assert action.definition.approval.when == expected


def test_several_documents_in_one_file_are_several_actions(tmp_path: Path) -> None:
    second = edited("id: demo.act", "id: demo.second")
    write(tmp_path, "a.yaml", VALID + "---\n" + second + "...\n")

    loaded = load_manifests(tmp_path, environ={})

    assert [action.id for action in loaded.actions] == ["demo.act", "demo.second"]
    # The second document starts after the first one's lines and the "---" separator.
    assert loaded.actions[1].line == len(VALID.splitlines()) + 2


def test_http_executor_settings_and_environment_variables_are_applied(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", _with_http())
    environ = {"TENANT_PATH": "acme", "ERP_TOKEN": "s3cret"}

    (action,) = load_manifest_dir(tmp_path, environ=environ)
    executor = action.definition.executor

    assert isinstance(executor, HttpExecutor)
    assert executor.url == "http://127.0.0.1:9/invoices/acme"
    assert executor.method == "PUT"
    assert executor.timeout == 0.25
    assert executor.headers == {
        "Authorization": "Bearer s3cret",
        "X-Plain": "no variables, $ literal",
    }
    assert executor.response.status_codes == {404: "INVOICE_NOT_FOUND", 503: "ERP_DOWN"}
    assert action.definition.executor_idempotent is True
    assert "s3cret" not in repr(executor)


def test_an_environment_variable_overrides_its_default(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", _with_http())
    environ = {"TENANT_PATH": "acme", "ERP_TOKEN": "t", "ERP_URL": "https://erp.example"}

    (action,) = load_manifest_dir(tmp_path, environ=environ)

    assert isinstance(action.definition.executor, HttpExecutor)
    assert action.definition.executor.url == "https://erp.example/invoices/acme"


def test_an_unset_variable_without_default_is_a_load_error(tmp_path: Path) -> None:
    text = _with_http()
    write(tmp_path, "a.yaml", text)

    problem = only_problem(tmp_path, environ={"TENANT_PATH": "acme"})

    assert problem.code is ProblemCode.UNDEFINED_VARIABLE
    assert problem.path == "spec.executor.http.headers.Authorization"
    assert problem.line == line_of(text, "Authorization:")


def test_deferred_work_maps_its_cancel_hook_orphan_policy_and_secret(tmp_path: Path) -> None:
    deferred = (
        "  executor:\n    mode: deferred\n    python: tests.manifest.hooks:echo\n"
        "    timeout: 2h\n    cancel: tests.manifest.hooks:stop\n    orphan: cancel\n"
        '    callback_secret: "${CALLBACK_SECRET}"\n'
    )
    write(tmp_path, "a.yaml", edited(PYTHON_EXECUTOR, deferred))

    (action,) = load_manifest_dir(tmp_path, environ={"CALLBACK_SECRET": "hmac-key"})
    definition = action.definition

    assert definition.mode is ExecutorMode.DEFERRED
    assert definition.cancel is hooks.stop
    assert definition.orphan is OrphanPolicy.CANCEL
    assert definition.callback_secret == "hmac-key"
    assert definition.timeout == timedelta(hours=2)


def test_deferred_work_needs_a_completion_deadline(tmp_path: Path) -> None:
    text = edited(
        PYTHON_EXECUTOR, "  executor:\n    mode: deferred\n    python: tests.manifest.hooks:echo\n"
    )
    write(tmp_path, "a.yaml", text)

    problem = only_problem(tmp_path)

    assert (problem.code, problem.path) == (ProblemCode.MISSING_FIELD, "spec.executor.timeout")
    assert problem.line == line_of(text, "executor:")


def test_deferred_settings_on_synchronous_work_are_an_error(tmp_path: Path) -> None:
    text = edited("    idempotent: true\n", "    idempotent: true\n    orphan: cancel\n")
    write(tmp_path, "a.yaml", text)

    problem = only_problem(tmp_path)

    assert (problem.code, problem.path) == (ProblemCode.INVALID_VALUE, "spec.executor.orphan")
    assert problem.line == line_of(text, "orphan:")


def test_headers_signoff_sets_itself_cannot_be_overridden(tmp_path: Path) -> None:
    text = edited(
        PYTHON_EXECUTOR,
        "  executor:\n    http:\n      url: http://127.0.0.1:9/\n"
        "      headers: {Idempotency-Key: mine}\n",
    )
    write(tmp_path, "a.yaml", text)

    problem = only_problem(tmp_path)

    assert (problem.code, problem.path) == (
        ProblemCode.INVALID_VALUE,
        "spec.executor.http.headers.Idempotency-Key",
    )


@pytest.mark.parametrize(
    ("text", "value", "missing", "malformed"),
    [
        ("${A}/${B:-b}", "a/b", (), False),
        ("${MISSING}", "", ("MISSING",), False),
        ("${EMPTY:-fallback}", "fallback", (), False),
        ("${MISSING:-fallback}", "fallback", (), False),
        ("${A:-fallback}", "a", (), False),
        ("${EMPTY-fallback}", "", (), False),
        ("${MISSING-fallback}", "fallback", (), False),
        ("${A-fallback}", "a", (), False),
        ("${EMPTY:-}", "", (), False),
        ("${EMPTY}", "", (), False),
        ("$${A} and $$", "${A} and $", (), False),
        ("${not closed", "${not closed", (), True),
    ],
)
def test_variable_substitution(
    text: str, value: str, missing: tuple[str, ...], malformed: bool
) -> None:
    result = substitute(text, {"A": "a", "EMPTY": ""})

    assert (result.value, result.missing, result.malformed) == (value, missing, malformed)


def test_hooks_import_with_the_manifest_directorys_parent_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    package = f"hooks_{uuid.uuid4().hex[:8]}"
    write(tmp_path / package, "__init__.py", "")
    write(tmp_path / package, "run.py", "def execute(context):\n    return {'ok': True}\n")
    write(
        tmp_path / "manifests",
        "a.yaml",
        edited("python: tests.manifest.hooks:echo", f"python: {package}.run:execute"),
    )

    (action,) = load_manifest_dir(tmp_path / "manifests", environ={})

    assert action.definition.executor.__module__ == f"{package}.run"
    assert sys.path[0] == str(tmp_path.resolve())


def test_the_shipped_schema_is_the_one_the_models_generate() -> None:
    assert json.loads(shipped_schema_text()) == manifest_json_schema(), "run `make schema`"


def test_the_schema_accepts_the_demo_manifests_and_rejects_unknown_fields() -> None:
    validator = jsonschema_rs.Draft202012Validator(json.loads(shipped_schema_text()))
    documents = [
        document
        for path in sorted((DEMO_MANIFESTS).glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
    ]
    valid = yaml.safe_load(VALID)
    misspelt = yaml.safe_load(edited("  resource:", "  resorce:"))

    assert len(documents) >= 4
    assert [list(validator.iter_errors(document)) for document in documents] == [
        [] for _ in documents
    ]
    assert list(validator.iter_errors(valid)) == []
    assert [error.schema_path[-1] for error in validator.iter_errors(misspelt)] == [
        "additionalProperties"
    ]
