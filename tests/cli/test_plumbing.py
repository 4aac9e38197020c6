"""Every command refuses the same way: one line on stderr ending in ``[CODE]``, non-zero exit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from signoff.cli import app

runner = CliRunner()
ONE_LINE_WITH_CODE = re.compile(r"^[^\n]+ \[[A-Z][A-Z0-9_]+\]\n?$")
IDENTITY_VARS = ("SIGNOFF_PRINCIPAL", "SIGNOFF_TENANT", "SIGNOFF_ROLES", "SIGNOFF_JWT_SECRET")


@pytest.mark.parametrize(
    ("args", "code", "status"),
    [
        (["serve", "--database", "memory://"], "UNAUTHENTICATED", 2),
        (
            ["serve", "--transport", "http", "--database", "memory://"],
            "AUTH_NOT_CONFIGURED",
            2,
        ),
        (["db", "purge", "--older-than", "soon", "--database", "memory://"], "INVALID_ARGUMENT", 1),
        (["db", "upgrade", "--database", "memory://"], "DATABASE_UNSUPPORTED", 1),
        (["runs", "show", "nope", "--database", "sqlite+aiosqlite:///missing.db"], None, 1),
        (["recover", "--manifests", "no-such-dir", "--database", "memory://"], None, 1),
    ],
)
def test_a_refusal_is_one_line_ending_in_its_code(
    args: list[str], code: str | None, status: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args, env={name: "" for name in IDENTITY_VARS})
    assert result.exit_code == status, result.output
    assert ONE_LINE_WITH_CODE.match(result.stderr), result.stderr
    if code is not None:
        assert result.stderr.rstrip().endswith(f"[{code}]")


def test_outside_the_project_the_missing_manifests_directory_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["recover", "--database", "memory://"])
    assert result.exit_code == 1
    assert "manifests/ not found" in result.stderr
    assert result.stderr.rstrip().endswith("[MANIFESTS_NOT_FOUND]")
