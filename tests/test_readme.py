"""The README is part of the contract: its code table and quickstart must stay true."""

from __future__ import annotations

import re
from pathlib import Path

from signoff.core.codes import CODE_DESCRIPTIONS, Code

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_result_code_is_in_the_readme_table_with_its_catalog_description() -> None:
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| (.+?) \|$", README.read_text(), re.MULTILINE))
    assert set(CODE_DESCRIPTIONS) == set(Code)
    assert {code: rows.get(code) for code in Code} == {
        code: CODE_DESCRIPTIONS[code] for code in Code
    }


def test_the_quickstart_is_the_two_make_commands() -> None:
    text = README.read_text()
    quickstart = text[text.index("## Quickstart") : text.index("## A one-minute tour")]
    commands = re.findall(r"^make (\w+)", quickstart, re.MULTILINE)
    assert commands == ["demo", "test"]


ROOT = README.parent
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_docs_stand_alone_every_relative_link_resolves_inside_the_repository() -> None:
    pages = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "CHANGELOG.md"]
    broken: list[str] = []
    for page in pages:
        text = page.read_text()
        if "../shared" in text or "CONTRACT.md" in text:
            broken.append(f"{page.name}: points at the founders' design folder")
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s)://, mailto: — not a file of ours
            resolved = (page.parent / target).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{page.name}: {target}")
    assert broken == []
