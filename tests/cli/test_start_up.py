"""The command line starts without loading the server: ``signoff --help``, ``--version`` and a
subcommand's ``--help`` import none of the MCP SDK, the database layer or the web stack.

The assertion is on the set of modules a fresh interpreter holds afterwards (not on a time, which
depends on the machine); ``benchmarks/cli_start_up.py`` measures the time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

from signoff import __version__

# What a command's help never needs: the server's stack and the store's.
HEAVY = {"mcp", "mcp_types", "sqlalchemy", "starlette", "uvicorn", "httpx", "alembic", "jinja2"}
# What the top-level help and version also never need (typer itself loads pydantic only to
# coerce a subcommand's parameters).
CORE = {"pydantic", "jwt", "cryptography", "cel", "jsonschema", "jsonschema_rs", "yaml"}

_PROBE = """
import json, sys
sys.argv = ["signoff", *json.loads(sys.argv[1])]
from signoff.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
loaded = sorted({name.split(".")[0] for name in sys.modules})
signoff = sorted(name for name in sys.modules if name.startswith("signoff."))
print(json.dumps({"code": code, "roots": loaded, "signoff": signoff}), file=sys.stderr)
"""


@dataclass(frozen=True)
class Loaded:
    code: int
    roots: frozenset[str]
    signoff: frozenset[str]
    stdout: str


def _loaded(*args: str) -> Loaded:
    """Run ``signoff ARGS`` in a fresh interpreter; what it printed and which modules it holds."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = json.loads(done.stderr.strip().splitlines()[-1])
    return Loaded(
        found["code"], frozenset(found["roots"]), frozenset(found["signoff"]), done.stdout
    )


@pytest.mark.parametrize("args", [("--help",), ("--version",)])
def test_the_top_level_help_and_version_load_neither_the_server_nor_the_core(
    args: tuple[str, ...],
) -> None:
    found = _loaded(*args)
    assert found.code == 0
    assert found.roots & (HEAVY | CORE) == set()
    assert "signoff.core.run" not in found.signoff


@pytest.mark.parametrize(
    "args",
    [
        ("approvals", "approve", "--help"),
        ("runs", "list", "--help"),
        ("serve", "--help"),
        ("demo", "--help"),
        ("audit", "verify", "--help"),
        ("policy", "replay", "--help"),
    ],
)
def test_a_subcommands_help_loads_no_server_stack(args: tuple[str, ...]) -> None:
    found = _loaded(*args)
    assert found.code == 0
    assert found.roots & HEAVY == set()


def test_version_prints_the_package_version() -> None:
    assert _loaded("--version").stdout == f"signoff {__version__}\n"


def test_the_cli_offers_the_key_ring_variable_the_audit_package_reads() -> None:
    from signoff.audit.keys import ENV
    from signoff.cli.audit import KEYS_ENV

    assert KEYS_ENV == ENV
