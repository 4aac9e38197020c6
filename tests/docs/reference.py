"""The generated parts of the docs: the code table of docs/api.md (from the code catalog and the
HTTP status map), the settings tables of docs/settings.md (from the settings catalog) and the
tasks exchange of docs/mcp.md (captured from a real server, ``tests/docs/mcp_wire.py``).

``make docs-tables`` rewrites both (``python -m tests.docs.reference``); the tests in this folder
fail when either is stale.
"""

from __future__ import annotations

from pathlib import Path

from signoff.core.codes import CODE_DESCRIPTIONS, Code
from signoff.settings import markdown_table
from signoff.surfaces.web.http import STATUS_OF

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
SETTINGS = ROOT / "docs" / "settings.md"


def codes_table() -> str:
    """Every catalog code with the HTTP status the web surface answers it with."""
    rows = ["| code | HTTP | meaning |", "|---|---|---|"]
    for code in Code:
        rows.append(f"| `{code.value}` | {STATUS_OF.get(code, 200)} | {CODE_DESCRIPTIONS[code]} |")
    return "\n".join(rows) + "\n"


def between(text: str, name: str) -> tuple[int, int]:
    """Where the generated part marked ``<!-- name:start -->`` ... ``<!-- name:end -->`` is."""
    start = f"<!-- {name}:start -->\n"
    return text.index(start) + len(start), text.index(f"<!-- {name}:end -->")


def generated(path: Path, name: str) -> str:
    text = path.read_text()
    start, end = between(text, name)
    return text[start:end]


def rewrite(path: Path, name: str, content: str) -> None:
    text = path.read_text()
    start, end = between(text, name)
    path.write_text(text[:start] + content + text[end:])


if __name__ == "__main__":
    from tests.docs.mcp_wire import PAGE, capture

    rewrite(API, "codes", codes_table())
    rewrite(SETTINGS, "settings", markdown_table())
    rewrite(PAGE, "tasks-wire", capture())
