"""The core imports the standard library, pydantic, CEL and jsonschema — nothing from the edges."""

from __future__ import annotations

import ast
from pathlib import Path

import signoff.core

FORBIDDEN = {"mcp", "sqlalchemy", "starlette", "uvicorn", "httpx", "alembic", "typer", "jinja2"}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_core_never_imports_mcp_sqlalchemy_or_starlette() -> None:
    core = Path(signoff.core.__file__).parent
    files = sorted(core.rglob("*.py"))
    assert len(files) > 5
    offenders = {
        str(path.relative_to(core)): sorted(_imported_roots(path) & FORBIDDEN) for path in files
    }
    assert {name: bad for name, bad in offenders.items() if bad} == {}


def test_the_import_walker_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text("import os\nfrom sqlalchemy.ext import asyncio\nimport mcp.types\n")
    assert _imported_roots(sample) & FORBIDDEN == {"sqlalchemy", "mcp"}
