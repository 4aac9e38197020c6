"""One catalog of settings (``signoff.settings``) that cannot go stale: every variable the source
reads is in it, everything in it is read, its defaults are the code's, and the env file, the
settings reference and ``server.json`` are made from it or checked against it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from signoff.cli.serve_settings import ServeSettings
from signoff.core.dispatch import DEFAULT_TENANT_SHARE
from signoff.core.input_limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from signoff.core.runtime import DEFAULT_PENDING_PER_PRINCIPAL
from signoff.settings import BY_NAME, SETTINGS, env_file
from signoff.store.factory import DEFAULT_DATABASE_URL
from signoff.surfaces.access import jwks
from signoff.surfaces.access.scopes import DEFAULT_APPROVE, DEFAULT_OPERATE, DEFAULT_PROPOSE
from signoff.surfaces.mcp import sessions

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "signoff"
# Named in the source but not read by signoff: the demo prints it for its agent script.
NOT_SETTINGS = {"SIGNOFF_URL"}
NAME = re.compile(r"\b((?:SIGNOFF|OTEL)_[A-Z0-9_]*[A-Z0-9])\b")


def names_in_source() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        if path.is_relative_to(SOURCE / "settings"):
            continue  # the catalog itself
        for name in set(NAME.findall(path.read_text(encoding="utf-8"))) - NOT_SETTINGS:
            found.setdefault(name, set()).add(str(path.relative_to(SOURCE)))
    return found


def serve_settings_names() -> set[str]:
    return {f"SIGNOFF_{field.upper()}" for field in ServeSettings.model_fields}


def test_every_variable_the_source_reads_is_in_the_catalog() -> None:
    read = set(names_in_source()) | serve_settings_names()
    assert sorted(read - set(BY_NAME)) == []


def test_everything_in_the_catalog_is_read_somewhere() -> None:
    read = set(names_in_source()) | serve_settings_names()
    assert sorted(set(BY_NAME) - read) == []


def test_each_name_is_listed_once() -> None:
    assert len(SETTINGS) == len(BY_NAME)


def test_the_catalog_defaults_are_the_codes_defaults() -> None:
    def shown(value: object) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    expected = {
        f"SIGNOFF_{name.upper()}": shown(field.default)
        for name, field in ServeSettings.model_fields.items()
    } | {
        "SIGNOFF_DATABASE_URL": DEFAULT_DATABASE_URL,
        "SIGNOFF_MAX_INPUT_BYTES": str(DEFAULT_MAX_BYTES),
        "SIGNOFF_MAX_INPUT_DEPTH": str(DEFAULT_MAX_DEPTH),
        "SIGNOFF_PENDING_APPROVALS_PER_PRINCIPAL": str(DEFAULT_PENDING_PER_PRINCIPAL),
        "SIGNOFF_LANE_TENANT_SHARE": shown(DEFAULT_TENANT_SHARE),
        "SIGNOFF_SCOPE_PROPOSE": DEFAULT_PROPOSE,
        "SIGNOFF_SCOPE_APPROVE": DEFAULT_APPROVE,
        "SIGNOFF_SCOPE_OPERATE": DEFAULT_OPERATE,
        "SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL": str(sessions.DEFAULT_PER_PRINCIPAL),
        "SIGNOFF_MCP_MAX_SESSIONS": str(sessions.DEFAULT_MAX_SESSIONS),
        "SIGNOFF_MCP_SESSION_IDLE_SECONDS": shown(sessions.DEFAULT_IDLE_TIMEOUT),
        "SIGNOFF_JWT_JWKS_CACHE_SECONDS": shown(jwks.DEFAULT_MAX_AGE),
        "SIGNOFF_JWT_JWKS_REFRESH_SECONDS": shown(jwks.DEFAULT_MIN_INTERVAL),
        "SIGNOFF_JWT_JWKS_TIMEOUT_SECONDS": shown(jwks.DEFAULT_TIMEOUT),
    }
    assert {name: BY_NAME[name].default for name in expected} == expected


def test_the_env_file_lists_every_setting_commented_out(tmp_path: Path) -> None:
    text = env_file()
    assigned = re.findall(r"^# ([A-Z][A-Z0-9_]*)=", text, re.MULTILINE)
    path = tmp_path / "signoff.env"
    path.write_text(text)

    sourced = subprocess.run(
        ["bash", "-c", f"env -i bash -c 'set -a; . {path}; env'"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert sorted(assigned) == sorted(BY_NAME)
    assert [line for line in text.splitlines() if line and not line.startswith("#")] == []
    assert not any(line.startswith(("SIGNOFF_", "OTEL_")) for line in sourced.stdout.splitlines())


def test_the_env_file_uncommented_is_valid_shell_with_the_defaults(tmp_path: Path) -> None:
    uncommented = re.sub(r"^# ([A-Z][A-Z0-9_]*=)", r"\1", env_file(), flags=re.MULTILINE)
    path = tmp_path / "all.env"
    path.write_text(uncommented)

    sourced = subprocess.run(
        ["env", "-i", "bash", "-c", f"set -a; . {path}; env"],
        capture_output=True,
        text=True,
        check=True,
    )
    values = dict(line.split("=", 1) for line in sourced.stdout.splitlines() if "=" in line)
    literal = {s.name: s.default for s in SETTINGS if s.default and not s.computed and not s.secret}
    assert {name: values.get(name) for name in literal} == literal
