"""docs/audit.md's independent verifier, run as an auditor would on real exports."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from tests.cli.test_audit_tamper import populate, url

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def doc_script(tmp_path: Path) -> Path:
    text = (ROOT / "docs" / "audit.md").read_text()
    [code] = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "rfc8785" in b]
    script = tmp_path / "verify_export.py"
    script.write_text(code)
    return script


def export(db: Path, target: Path) -> Path:
    result = runner.invoke(app, ["audit", "export", "--database", url(db), "-o", str(target)])
    assert result.exit_code == 0, result.output
    return target


def run_script(script: Path, exported: Path, *keys: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), str(exported), *keys],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_documented_rule_verifies_an_untouched_export_with_its_signed_checkpoints(
    tmp_path: Path,
) -> None:
    db = tmp_path / "signoff.db"
    populate(db)
    made = runner.invoke(app, ["audit", "keygen", "k1", "--dir", str(tmp_path)])
    ring = tmp_path / "ring.yaml"
    ring.write_text(f"signing_key: k1\nkeys:\n{made.stdout}")
    signed = runner.invoke(app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)])
    assert signed.exit_code == 0, signed.output
    script = doc_script(tmp_path)
    done = run_script(script, export(db, tmp_path / "e.jsonl"), f"k1={tmp_path / 'k1.pub.pem'}")
    assert done.returncode == 0, done.stderr
    assert "in 2 chains" in done.stdout

    forged = tmp_path / "forged.db"
    shutil.copy(db, forged)
    with sqlite3.connect(forged) as raw:
        raw.execute("UPDATE signoff_audit_checkpoints SET chain_seq = chain_seq - 1")
    done = run_script(script, export(forged, tmp_path / "f.jsonl"), f"k1={tmp_path / 'k1.pub.pem'}")
    assert done.returncode != 0
    assert "InvalidSignature" in done.stderr


def test_the_documented_rule_finds_an_edited_and_a_deleted_event(tmp_path: Path) -> None:
    db = tmp_path / "signoff.db"
    populate(db)
    script = doc_script(tmp_path)
    edited = tmp_path / "edited.db"
    shutil.copy(db, edited)
    with sqlite3.connect(edited) as raw:
        raw.execute("UPDATE signoff_audit_events SET actor = 'mallory' WHERE kind = 'approved'")
        raw.execute(
            "UPDATE signoff_audit_events SET actor = 'mallory' WHERE kind = 'approval_recorded'"
        )
    done = run_script(script, export(edited, tmp_path / "edited.jsonl"))
    assert done.returncode != 0
    assert "content does not match its hash" in done.stderr

    deleted = tmp_path / "deleted.db"
    shutil.copy(db, deleted)
    with sqlite3.connect(deleted) as raw:
        raw.execute("DELETE FROM signoff_audit_events WHERE kind = 'approval_recorded'")
    done = run_script(script, export(deleted, tmp_path / "deleted.jsonl"))
    assert done.returncode != 0
    assert "chain jumps" in done.stderr
