"""The reference pages cannot drift: the approvers' API lists every code of the catalog with its
HTTP status, the settings page is the settings catalog, and the CLI page names every command."""

from __future__ import annotations

import re

import typer.main

from signoff.cli import app
from signoff.core.codes import CODE_DESCRIPTIONS, Code
from signoff.settings import markdown_table
from signoff.surfaces.web import links
from signoff.surfaces.web.http import STATUS_OF
from tests.docs.reference import API, ROOT, SETTINGS, codes_table, generated

ROW = re.compile(r"^\| `([A-Z_]+)` \| (\d{3}) \| (.+?) \|$", re.MULTILINE)


def test_the_api_page_lists_every_code_with_its_status_and_meaning() -> None:
    rows = {
        code: (int(status), meaning)
        for code, status, meaning in ROW.findall(generated(API, "codes"))
    }

    assert rows == {
        code.value: (STATUS_OF.get(code, 200), CODE_DESCRIPTIONS[code]) for code in Code
    }
    assert generated(API, "codes") == codes_table(), "run `make docs-tables`"


def test_the_api_page_names_every_decision_link_refusal() -> None:
    page = API.read_text()
    for code in (links.LINK_INVALID, links.LINK_USED, links.LINK_EXPIRED, links.LINK_STALE):
        assert f"`{code}`" in page


def test_the_settings_page_is_the_settings_catalog() -> None:
    assert generated(SETTINGS, "settings") == markdown_table(), "run `make docs-tables`"


def commands(group: object, prefix: tuple[str, ...] = ()) -> list[str]:
    found = []
    for name, command in sorted(getattr(group, "commands", {}).items()):
        if getattr(command, "commands", None):
            found += commands(command, (*prefix, name))
        else:
            found.append(" ".join((*prefix, name)))
    return found


def test_the_cli_page_names_every_command() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    every = commands(typer.main.get_command(app))

    assert len(every) > 15
    assert [name for name in every if f"`signoff {name}" not in page] == []
