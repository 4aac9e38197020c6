"""Dependencies by need: the base install serves on SQLite; each optional feature names its extra.

A missing extra is simulated the way Python itself reports one: ``sys.modules[name] = None``
makes ``import name`` raise ``ImportError``, exactly as in an install without that package. The
real thing (a fresh virtualenv with the base wheel only) is ``tests/packaging``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from signoff.demo import MANIFESTS as DEMO_MANIFESTS
from signoff.extras import CODE, EXTRAS, ExtraMissing, require

ROOT = Path(__file__).resolve().parent.parent
SECRET = "s" * 40

# The feature, how to ask for it, and the extra it must name.
FEATURES = {
    "postgres": (
        ["serve", "--transport", "stdio", "--principal", "a", "--tenant", "t",
         "--database", "postgresql+asyncpg://u@127.0.0.1:9/x"],
        {},
    ),
    "mysql": (["db", "status", "--database", "mysql+aiomysql://u@127.0.0.1:9/x"], {}),
    "slack": (
        ["serve", "--transport", "http", "--database", "memory://"],
        {"SIGNOFF_JWT_SECRET": SECRET, "SIGNOFF_SLACK_BOT_TOKEN": "xoxb-1",
         "SIGNOFF_SLACK_SIGNING_SECRET": "signing", "SIGNOFF_SLACK_CHANNEL": "C1"},
    ),
    "sso": (
        ["serve", "--transport", "http", "--database", "memory://"],
        {"SIGNOFF_JWT_SECRET": SECRET, "SIGNOFF_OIDC_ISSUER": "https://login.example.com",
         "SIGNOFF_OIDC_CLIENT_ID": "inbox"},
    ),
    "otel": (
        ["serve", "--transport", "stdio", "--principal", "a", "--tenant", "t",
         "--database", "memory://"],
        {"OTEL_TRACES_EXPORTER": "console"},
    ),
}  # fmt: skip

# Runs the real entry point (``signoff.cli:main``) with the given modules made unimportable.
WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    if name:
        sys.modules[name] = None
sys.argv = ["signoff", *sys.argv[2:]]
from signoff.cli import main
main()
"""


def signoff_without(
    modules: tuple[str, ...], args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SIGNOFF_", "OTEL_"))}
    return subprocess.run(
        [sys.executable, "-c", WITHOUT, ",".join(modules), *args],
        env={**clean, "SIGNOFF_MANIFESTS": str(DEMO_MANIFESTS), **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("extra", sorted(FEATURES))
def test_a_configured_feature_whose_extra_is_missing_fails_at_start_naming_the_extra(
    extra: str, tmp_path: Path
) -> None:
    args, env = FEATURES[extra]

    done = signoff_without(EXTRAS[extra], args, env, tmp_path)

    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(f"[{CODE}]")
    assert f"signoff[{extra}]" in last
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_without_any_extra_the_cli_loads_and_checks_manifests(tmp_path: Path) -> None:
    every = tuple(module for modules in EXTRAS.values() for module in modules)

    done = signoff_without(every, ["check", str(DEMO_MANIFESTS)], {}, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "the manifests are valid" in done.stdout


def test_require_names_the_extra_and_the_feature(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "authlib", None)

    with pytest.raises(ExtraMissing) as caught:
        require("sso", "inbox single sign-on")

    assert (caught.value.code, caught.value.extra, caught.value.module) == (
        "EXTRA_MISSING",
        "sso",
        "authlib",
    )


def test_require_passes_when_the_extra_is_installed() -> None:
    require("sso", "inbox single sign-on")  # the dev install has every extra


def test_the_base_dependencies_hold_no_optional_feature_and_all_holds_every_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_name(requirement) for requirement in project["dependencies"]}
    extras = project["optional-dependencies"]
    optional = {_name(r) for extra in EXTRAS for r in extras[extra]}

    assert base & optional == set()
    assert {"asyncpg", "aiomysql", "slack-sdk", "authlib", "opentelemetry-sdk"} <= optional
    assert extras["all"] == [f"signoff[{','.join(EXTRAS)}]"]
    assert "signoff[all]" in extras["dev"]
    # One JSON Schema validator: jsonschema-rs validates inputs and checks manifests' schemas.
    assert "jsonschema-rs" in base
    assert "jsonschema" not in base


def test_signoff_itself_never_imports_the_pure_python_jsonschema() -> None:
    offenders = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "jsonschema" for name in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def _name(requirement: str) -> str:
    for stop in "[<>=!~; ":
        requirement = requirement.split(stop)[0]
    return requirement.strip().lower()
