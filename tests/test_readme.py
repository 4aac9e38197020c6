"""The README is what a newcomer reads first: its quickstart, first action and library table must
stay true, and every link in it and in the docs must resolve."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
ROOT = README.parent


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_quickstart_is_the_two_make_commands() -> None:
    commands = re.findall(r"^make (\w+)", section("Quickstart"), re.MULTILINE)
    assert commands == ["demo", "test"]


def test_the_readme_stays_a_first_five_minutes_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) < 160
    # The internals moved to docs/; the README links them.
    for moved in ("docs/performance.md", "docs/storage.md", "docs/architecture.md"):
        assert f"]({moved})" in text
    assert "| code | meaning |" not in text  # the code catalog is docs/api.md's


def test_the_first_action_uses_what_signoff_init_writes() -> None:
    from signoff.cli.init import TEMPLATES

    shown = section("A first action")
    assert "signoff init " in shown and "signoff check" in shown
    assert "python agent.py" in shown and "agent.py" in TEMPLATES.values()
    assert "](docs/tutorial.md)" in shown


def test_the_libraries_table_names_every_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for name, requirements in project["optional-dependencies"].items():
        if name not in ("all", "dev"):
            wanted += requirements
    names = {re.split(r"[\[<>=!~; ]", requirement)[0].lower() for requirement in wanted}
    table = section("Libraries, and why").lower()

    assert sorted(name for name in names if f"`{name}`" not in table and name not in table) == []


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_docs_stand_alone_every_relative_link_resolves_inside_the_repository() -> None:
    pages = [
        README,
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "server").rglob("*.md")),
        ROOT / "CHANGELOG.md",
    ]
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
