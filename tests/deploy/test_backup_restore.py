"""docs/deploy.md's SQLite backup, run as the page writes it while the database is open, restores
to a copy that `signoff audit verify` passes — and verify after a restore is a real check: a
copy with an edited event fails it."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from tests.cli.test_audit_and_recover import _populate

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def backup_command() -> str:
    """The page's online SQLite backup (``python3 -c "..."``)."""
    found = re.search(r'`python3 -c "(import sqlite3; [^"]+)"`', PAGE.read_text())
    assert found is not None, "docs/deploy.md no longer shows the SQLite backup command"
    return found.group(1)


def verify(db: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit", "verify", "--database", f"sqlite+aiosqlite:///{db}"])
    return result.exit_code, result.output


def test_the_documented_sqlite_backup_restores_to_a_trail_that_verifies(tmp_path: Path) -> None:
    _populate(tmp_path / "signoff.db")
    reader = sqlite3.connect(tmp_path / "signoff.db")  # a server still has the database open
    try:
        subprocess.run(
            [sys.executable, "-c", backup_command()], cwd=tmp_path, check=True, timeout=60
        )
    finally:
        reader.close()
    restored = tmp_path / "restored" / "signoff.db"
    restored.parent.mkdir()
    (tmp_path / "backup.db").rename(restored)

    status, output = verify(restored)

    assert status == 0, output
    assert "consistent for 4 runs" in output


def test_a_restored_copy_with_an_edited_event_fails_verify(tmp_path: Path) -> None:
    _populate(tmp_path / "signoff.db")
    subprocess.run([sys.executable, "-c", backup_command()], cwd=tmp_path, check=True, timeout=60)
    with sqlite3.connect(tmp_path / "backup.db") as raw:  # an edit behind signoff's back
        raw.execute("UPDATE signoff_audit_events SET actor = 'someone-else' WHERE rowid = 1")

    status, output = verify(tmp_path / "backup.db")

    assert status == 1
    assert "[AUDIT_INCONSISTENT]" in output
