"""The docs build as a site: ``mkdocs build --strict`` (Material theme) fails on a broken link or
anchor, a page missing from the nav or a missing included file, so this test does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"


@pytest.mark.slow
def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    pages = {path.name for path in (tmp_path / "site").glob("*.html")}
    assert {"index.html", "tutorial.html", "deploy.html", "api.html", "settings.html"} <= pages


def test_every_docs_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(path.name for path in (ROOT / "docs").glob("*.md"))

    assert [page for page in pages if f": {page}" not in config] == []
