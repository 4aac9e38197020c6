"""docs/audit.md's independent verifier, run as an auditor would on real exports."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

from typer.testing import CliRunner

from signoff.cli import app
from tests.cli import test_receipts as receipts
from tests.cli.test_audit_tamper import populate, populate_more, url

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def doc_script(tmp_path: Path, marker: str = "export_file", name: str = "verify_export.py") -> Path:
    """The docs' script that reads ``marker`` (the export's or the receipt's verifier)."""
    text = (ROOT / "docs" / "audit.md").read_text()
    [code] = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if marker in b]
    script = tmp_path / name
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


def signed_rounds(tmp_path: Path, count: int) -> tuple[Path, Path, str]:
    """A trail with ``count`` rounds signed by an Ed25519 key; the database, the script and the
    public key argument."""
    db = tmp_path / "signoff.db"
    populate(db)
    made = runner.invoke(app, ["audit", "keygen", "k1", "--dir", str(tmp_path)])
    ring = tmp_path / "ring.yaml"
    ring.write_text(f"signing_key: k1\nkeys:\n{made.stdout}")
    for number in range(1, count + 1):
        if number > 1:
            populate_more(db)
        signed = runner.invoke(
            app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)]
        )
        assert f"in round {number}" in signed.stdout, signed.output
    return db, doc_script(tmp_path), f"k1={tmp_path / 'k1.pub.pem'}"


def tampered(db: Path, tmp_path: Path, name: str, *statements: str) -> Path:
    target = tmp_path / f"{name}.db"
    shutil.copy(db, target)
    with sqlite3.connect(target) as raw:
        for statement in statements:
            raw.execute(statement)
    return export(target, tmp_path / f"{name}.jsonl")


def test_the_documented_rule_checks_rounds_and_names_the_latest_for_next_time(
    tmp_path: Path,
) -> None:
    db, script, key = signed_rounds(tmp_path, 3)
    done = run_script(script, export(db, tmp_path / "e.jsonl"), key)
    assert done.returncode == 0, done.stderr
    with closing(sqlite3.connect(db)) as raw:
        [(latest,)] = raw.execute("SELECT hash FROM signoff_audit_rounds WHERE round = 3")
    assert done.stdout.strip().endswith(f"in 2 chains; latest round 3:{latest}")
    again = run_script(script, export(db, tmp_path / "e2.jsonl"), key, f"--anchor=3:{latest}")
    assert again.returncode == 0, again.stderr


def test_the_documented_rule_finds_a_tenant_deleted_whole_behind_a_round(tmp_path: Path) -> None:
    db, script, key = signed_rounds(tmp_path, 2)
    gone = tampered(
        db,
        tmp_path,
        "gone",
        *(
            f"DELETE FROM {table} WHERE tenant_id = 'other'"
            for table in (
                "signoff_audit_events",
                "signoff_audit_heads",
                "signoff_audit_checkpoints",
                "signoff_runs",
            )
        ),
    )
    done = run_script(script, gone, key)
    assert done.returncode != 0
    assert "tenant 'other' signed at #" in done.stderr and "is missing" in done.stderr


def test_the_documented_rule_finds_a_deleted_round_and_a_deleted_checkpoint(
    tmp_path: Path,
) -> None:
    db, script, key = signed_rounds(tmp_path, 3)
    done = run_script(
        script,
        tampered(db, tmp_path, "round", "DELETE FROM signoff_audit_rounds WHERE round = 2"),
        key,
    )
    assert done.returncode != 0
    assert "round 3 follows round 1" in done.stderr
    done = run_script(
        script,
        tampered(
            db, tmp_path, "checkpoint", "DELETE FROM signoff_audit_checkpoints WHERE round = 2"
        ),
        key,
    )
    assert done.returncode != 0
    assert "its checkpoint was deleted" in done.stderr


def test_rounds_deleted_from_the_end_are_found_only_against_a_round_held_elsewhere(
    tmp_path: Path,
) -> None:
    """The store alone cannot tell its last round from a truncated one: an anchor can."""
    db, script, key = signed_rounds(tmp_path, 3)
    held = run_script(script, export(db, tmp_path / "before.jsonl"), key)
    anchor = held.stdout.strip().rsplit("latest round ", 1)[1]
    assert anchor.startswith("3:")
    cut = tampered(
        db,
        tmp_path,
        "cut",
        "DELETE FROM signoff_audit_rounds WHERE round = 3",
        "DELETE FROM signoff_audit_checkpoints WHERE round = 3",
    )
    assert run_script(script, cut, key).returncode == 0  # consistent on its own
    done = run_script(script, cut, key, f"--anchor={anchor}")
    assert done.returncode != 0
    assert "round 3 is not the one you hold" in done.stderr


def test_the_documented_receipt_verifier_checks_real_receipts_untouched_and_tampered(
    tmp_path: Path,
) -> None:
    db = tmp_path / "signoff.db"
    runs = asyncio.run(receipts._populate(db))
    _, ring, public_key = receipts._keys(tmp_path)
    signed = runner.invoke(app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)])
    assert signed.exit_code == 0, signed.output
    script = doc_script(tmp_path, "receipt_file", "verify_receipt.py")
    for name in ("plain", "amended", "denied", "failed", "repair"):
        target = tmp_path / f"{name}.json"
        made = runner.invoke(
            app,
            [
                "audit",
                "receipt",
                runs[name],
                "--database",
                url(db),
                "--keys",
                str(ring),
                "--reveal",
                "-o",
                str(target),
            ],
        )
        assert made.exit_code == 0, made.output
        done = run_script(script, target, str(public_key))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"receipt of run {runs[name]} holds: ")

    original = json.loads((tmp_path / "amended.json").read_text())
    for change, says in [
        (receipts._edit_event, "content does not match its hash"),
        (receipts._forge_event_and_hashes, "no key given verifies its signature"),
        (receipts._drop_event, "dropped or reordered"),
        (receipts._widen_elided, "no key given verifies its signature"),
        (lambda d: d["substance"]["approved_input"]["value"].update(amount=1), "its digest covers"),
        (lambda d: d["decisions"].pop(), "not the decisions chained"),
        (lambda d: d.update(resource="invoice/INV-666"), "not what was approved"),
    ]:
        document = copy.deepcopy(original)
        change(document)
        target = tmp_path / "tampered.json"
        target.write_text(json.dumps(document))
        done = run_script(script, target, str(public_key))
        assert done.returncode != 0 and says in done.stderr, (says, done.stderr)
