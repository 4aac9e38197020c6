"""`signoff audit verify` tried as an auditor would: each tampering of a database copy is found,
and the first bad event is named; checkpoints, key rotation and export resume."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from signoff import ApprovalSpec
from signoff.cli import app
from signoff.core.chain import event_hash
from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.factory import open_store
from signoff.store.sql.codec import audit_from_row
from tests.helpers import LEAD, LEAD2, Recorder, approve, definition, proposal

runner = CliRunner()
Copy = tuple[Path, dict[str, str]]
QUORUM = ApprovalSpec(when="input.amount > 1000.0", approver_roles=("billing-lead",), count=2)


def url(db: Path) -> str:
    return f"sqlite+aiosqlite:///{db}"


def populate(db: Path) -> dict[str, str]:
    """Three runs in tenant acme (a 2-person quorum among them) and one in tenant other."""

    async def work() -> dict[str, str]:
        store = await open_store(url(db))
        try:
            runtime = Runtime(ActionRegistry([definition(Recorder(), approval=QUORUM)]), store)
            small = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 10}))
            quorum = await runtime.propose(
                proposal({"invoice_id": "INV-2", "amount": 5000}, key="k2")
            )
            await runtime.decide(quorum.run_id, "acme", approve(LEAD))
            await runtime.decide(quorum.run_id, "acme", approve(LEAD2))
            last = await runtime.propose(proposal({"invoice_id": "INV-3", "amount": 20}, key="k3"))
            other = await runtime.propose(
                proposal({"invoice_id": "INV-1", "amount": 10}, tenant="other")
            )
            await runtime.drain()  # the approved dispatch may still be finishing in the background
            return {
                "small": small.run_id,
                "quorum": quorum.run_id,
                "last": last.run_id,
                "other": other.run_id,
            }
        finally:
            await store.close()

    return asyncio.run(work())


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("trail") / "signoff.db"
    return db, populate(db)


@pytest.fixture
def copy(original: tuple[Path, dict[str, str]], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the database for one tampering (as an auditor would work)."""
    db, runs = original
    target = tmp_path / "copy.db"
    shutil.copy(db, target)
    return target, runs


def sql(db: Path, statement: str, *params: object) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as raw:
        return raw.execute(statement, params).fetchall()


def verify(db: Path, *extra: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["audit", "verify", "--database", url(db), *extra])
    return result.exit_code, result.stdout, result.stderr


def first_bad(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("first bad: "))


def write_hmac_ring(directory: Path, *key_ids: str, signing: str) -> Path:
    ring = directory / "keys.yaml"
    entries = [
        {"id": k, "algorithm": "hmac-sha256", "secret": base64.b64encode(k.encode() * 32).decode()}
        for k in key_ids
    ]
    ring.write_text(json.dumps({"signing_key": signing, "keys": entries}))
    return ring


def test_an_untouched_trail_verifies_with_every_chain_and_run(copy: Copy) -> None:
    db, _ = copy
    code, out, err = verify(db)
    assert code == 0, err
    assert "consistent for 4 runs" in out
    assert "in 2 chains (0 pre-chain)" in out


def test_renaming_the_approver_in_an_approval_event_names_that_event(copy: Copy) -> None:
    db, runs = copy
    [(seq,)] = sql(
        db,
        "SELECT seq FROM signoff_audit_events WHERE run_id = ? AND kind = 'approval_recorded'",
        runs["quorum"],
    )
    sql(db, "UPDATE signoff_audit_events SET actor = 'mallory' WHERE seq = ?", seq)
    code, _, err = verify(db)
    assert code == 1
    assert "[AUDIT_INCONSISTENT]" in err
    assert first_bad(err).startswith(f"first bad: event seq {seq} ")
    assert "it was edited" in first_bad(err)


def test_deleting_one_approval_of_a_two_person_quorum_names_the_event_after_the_gap(
    copy: Copy,
) -> None:
    db, runs = copy
    [(seq, number)] = sql(
        db,
        "SELECT seq, chain_seq FROM signoff_audit_events WHERE run_id = ? "
        "AND kind = 'approval_recorded'",
        runs["quorum"],
    )
    sql(db, "DELETE FROM signoff_audit_events WHERE seq = ?", seq)
    code, _, err = verify(db)
    assert code == 1
    [(next_seq,)] = sql(
        db,
        "SELECT seq FROM signoff_audit_events WHERE tenant_id = 'acme' AND chain_seq = ?",
        number + 1,
    )
    assert first_bad(err).startswith(f"first bad: event seq {next_seq} ")
    assert f"jumps from #{number - 1} to #{number + 1}" in first_bad(err)


def test_deleting_a_whole_run_with_its_events_is_found(copy: Copy) -> None:
    db, runs = copy
    sql(db, "DELETE FROM signoff_audit_events WHERE run_id = ?", runs["quorum"])
    sql(db, "DELETE FROM signoff_runs WHERE run_id = ?", runs["quorum"])
    code, _, err = verify(db)
    assert code == 1
    assert "event(s) before it were deleted" in first_bad(err)


def test_deleting_only_a_run_row_leaves_events_without_their_run(copy: Copy) -> None:
    db, runs = copy
    sql(db, "DELETE FROM signoff_runs WHERE run_id = ?", runs["small"])
    code, _, err = verify(db)
    assert code == 1
    assert f"run {runs['small']}: has audit events but the run itself was deleted" in err


def test_swapping_two_events_in_the_log_is_found_as_a_reordering(copy: Copy) -> None:
    db, runs = copy
    seqs = [
        s
        for (s,) in sql(
            db, "SELECT seq FROM signoff_audit_events WHERE run_id = ? ORDER BY seq", runs["last"]
        )
    ]
    a, b = seqs[0], seqs[1]
    sql(db, "UPDATE signoff_audit_events SET seq = -1 WHERE seq = ?", a)
    sql(db, "UPDATE signoff_audit_events SET seq = ? WHERE seq = ?", a, b)
    sql(db, "UPDATE signoff_audit_events SET seq = ? WHERE seq = -1", b)
    code, _, err = verify(db)
    assert code == 1
    assert first_bad(err).startswith(f"first bad: event seq {a} ")
    assert "jumps" in first_bad(err)
    assert "reordered or inserted" in err


def test_an_event_inserted_outside_the_chain_is_named(copy: Copy) -> None:
    db, runs = copy
    sql(
        db,
        "INSERT INTO signoff_audit_events (run_id, tenant_id, kind, at, status) "
        "VALUES (?, 'acme', 'approval_recorded', '2026-01-01 00:00:00.000000', 'WAITING_APPROVAL')",
        runs["small"],
    )
    [(seq,)] = sql(db, "SELECT MAX(seq) FROM signoff_audit_events")
    code, _, err = verify(db)
    assert code == 1
    assert f"event seq {seq} " in err
    assert "inserted outside the chain" in err


def test_a_forged_link_with_a_valid_hash_of_its_own_is_found_by_its_neighbour(
    copy: Copy,
) -> None:
    """Rewriting one event and recomputing its hash breaks the next event's prev_hash."""
    db, runs = copy
    with sqlite3.connect(db) as raw:
        raw.row_factory = sqlite3.Row
        row = raw.execute(
            "SELECT * FROM signoff_audit_events WHERE run_id = ? AND kind = 'approval_recorded'",
            (runs["quorum"],),
        ).fetchone()
    values = dict(row)
    values["at"] = datetime.fromisoformat(values["at"]).replace(tzinfo=UTC)
    values["data"] = values["data"] and json.dumps(json.loads(values["data"]))
    changed = replace(audit_from_row(values), actor="mallory")
    digest = event_hash(changed, changed.chain_seq or 0, changed.prev_hash or "")
    sql(
        db,
        "UPDATE signoff_audit_events SET actor = 'mallory', hash = ? WHERE seq = ?",
        digest,
        changed.seq,
    )
    code, _, err = verify(db)
    assert code == 1
    assert f"does not link to #{changed.chain_seq}" in first_bad(err)
    assert "it was edited" not in err


def test_a_run_whose_state_disagrees_with_its_events_is_named(copy: Copy) -> None:
    db, runs = copy
    sql(
        db,
        "UPDATE signoff_runs SET status = 'CANCELLED', "
        "data = json_set(data, '$.status', 'CANCELLED') WHERE run_id = ?",
        runs["small"],
    )
    code, _, err = verify(db)
    assert code == 1
    assert f"run {runs['small']}: last event says SUCCEEDED but the run is CANCELLED" in err


def test_a_tail_deleted_past_a_checkpoint_is_found_even_with_the_head_fixed_up(
    copy: Copy, tmp_path: Path
) -> None:
    db, runs = copy
    ring = write_hmac_ring(tmp_path, "k1", signing="k1")
    done = runner.invoke(app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)])
    assert done.exit_code == 0, done.output
    assert "2 checkpoints signed with key 'k1'" in done.stdout
    assert verify(db, "--keys", str(ring))[0] == 0
    sql(db, "DELETE FROM signoff_audit_events WHERE run_id = ?", runs["last"])
    sql(db, "DELETE FROM signoff_runs WHERE run_id = ?", runs["last"])
    [(end, last_hash)] = sql(
        db,
        "SELECT chain_seq, hash FROM signoff_audit_events WHERE tenant_id = 'acme' "
        "ORDER BY chain_seq DESC LIMIT 1",
    )
    sql(
        db,
        "UPDATE signoff_audit_heads SET chain_seq = ?, head_hash = ? WHERE tenant_id = 'acme'",
        end,
        last_hash,
    )
    code, _, err = verify(db, "--keys", str(ring))
    assert code == 1
    assert f"the chain ends at #{end} but checkpoint" in err
    assert "(truncated tail)" in err


def test_a_tail_deleted_without_a_checkpoint_is_found_from_the_head_record(copy: Copy) -> None:
    db, runs = copy
    sql(db, "DELETE FROM signoff_audit_events WHERE run_id = ?", runs["last"])
    sql(db, "DELETE FROM signoff_runs WHERE run_id = ?", runs["last"])
    code, _, err = verify(db)
    assert code == 1
    assert "but its head record says" in err


def test_an_altered_checkpoint_fails_its_signature(copy: Copy, tmp_path: Path) -> None:
    db, _ = copy
    ring = write_hmac_ring(tmp_path, "k1", signing="k1")
    runner.invoke(app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)])
    sql(db, "UPDATE signoff_audit_checkpoints SET chain_seq = chain_seq - 1")
    code, _, err = verify(db, "--keys", str(ring))
    assert code == 1
    assert "its signature does not verify" in err


def test_after_key_rotation_old_and_new_checkpoints_both_verify(copy: Copy, tmp_path: Path) -> None:
    db, _ = copy
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old = write_hmac_ring(tmp_path / "old", "k1", signing="k1")
    checkpoint = ["audit", "checkpoint", "--database", url(db), "--keys"]
    assert runner.invoke(app, [*checkpoint, str(old)]).exit_code == 0
    populate_more(db)
    both = write_hmac_ring(tmp_path, "k1", "k2", signing="k2")
    made = runner.invoke(app, [*checkpoint, str(both)])
    assert "1 checkpoints signed with key 'k2'" in made.stdout
    keys = {k for (k,) in sql(db, "SELECT key_id FROM signoff_audit_checkpoints")}
    assert keys == {"k1", "k2"}
    code, out, err = verify(db, "--keys", str(both))
    assert code == 0, err
    assert "3 checkpoints" in out
    only_new = write_hmac_ring(tmp_path / "new", "k2", signing="k2")
    code, _, err = verify(db, "--keys", str(only_new))
    assert code == 1
    assert "signed by key 'k1', not in the key ring" in err


def populate_more(db: Path) -> None:
    async def work() -> None:
        store = await open_store(url(db))
        try:
            runtime = Runtime(ActionRegistry([definition(Recorder(), approval=QUORUM)]), store)
            await runtime.propose(proposal({"invoice_id": "INV-9", "amount": 1}, key="k9"))
            await runtime.drain()
        finally:
            await store.close()

    asyncio.run(work())


def test_an_ed25519_key_from_keygen_signs_and_its_public_half_alone_verifies(
    copy: Copy, tmp_path: Path
) -> None:
    db, _ = copy
    made = runner.invoke(app, ["audit", "keygen", "k-ed", "--dir", str(tmp_path)])
    assert made.exit_code == 0, made.output
    signing = tmp_path / "sign.yaml"
    signing.write_text(f"signing_key: k-ed\nkeys:\n{made.stdout}")
    signed = runner.invoke(
        app, ["audit", "checkpoint", "--database", url(db), "--keys", str(signing)]
    )
    assert signed.exit_code == 0, signed.output
    public = tmp_path / "public.yaml"
    public.write_text("keys:\n- id: k-ed\n  algorithm: ed25519\n  public_key_file: k-ed.pub.pem\n")
    code, out, err = verify(db, "--keys", str(public))
    assert code == 0, err
    assert "2 checkpoints" in out and "not checked" not in out


def test_checkpoint_without_a_key_ring_is_refused_with_its_code(copy: Copy) -> None:
    db, _ = copy
    result = runner.invoke(app, ["audit", "checkpoint", "--database", url(db)], env={})
    assert result.exit_code == 1
    assert "[AUDIT_KEYS_MISSING]" in result.stderr


def test_a_broken_key_ring_is_refused_with_its_code(copy: Copy, tmp_path: Path) -> None:
    db, _ = copy
    ring = tmp_path / "keys.yaml"
    ring.write_text("keys:\n- id: x\n  algorithm: hmac-sha256\n  secret: c2hvcnQ=\n")
    result = runner.invoke(app, ["audit", "verify", "--database", url(db), "--keys", str(ring)])
    assert result.exit_code == 1
    assert "at least 32 bytes [AUDIT_KEYS_INVALID]" in result.stderr


def test_export_streams_hashes_and_checkpoints_and_resumes_after_a_seq(
    copy: Copy, tmp_path: Path
) -> None:
    db, _ = copy
    ring = write_hmac_ring(tmp_path, "k1", signing="k1")
    runner.invoke(app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)])
    full = runner.invoke(app, ["audit", "export", "--database", url(db)])
    lines = [json.loads(line) for line in full.stdout.splitlines()]
    events = [x for x in lines if x["type"] == "event"]
    checkpoints = [x for x in lines if x["type"] == "checkpoint"]
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert all(len(e["hash"]) == 64 and not e["pre_chain"] for e in events)
    assert {c["tenant_id"] for c in checkpoints} == {"acme", "other"}
    middle = events[len(events) // 2]["seq"]
    rest = runner.invoke(
        app, ["audit", "export", "--database", url(db), "--after-seq", str(middle)]
    )
    resumed = [json.loads(line) for line in rest.stdout.splitlines()]
    assert [e for e in resumed if e["type"] == "event"] == [e for e in events if e["seq"] > middle]
    acme = runner.invoke(app, ["audit", "export", "--database", url(db), "--tenant", "other"])
    assert {json.loads(line)["tenant_id"] for line in acme.stdout.splitlines()} == {"other"}
    window = runner.invoke(
        app, ["audit", "export", "--database", url(db), "--since", "2999-01-01T00:00:00Z"]
    )
    assert window.exit_code == 0 and window.stdout == ""


def test_a_run_input_changed_after_its_approval_no_longer_matches_what_was_dispatched(
    copy: Copy,
) -> None:
    """The input the quorum approved is rewritten in the run row (its events untouched): the
    stored run no longer describes the call that was dispatched, nor the input proposed."""
    db, runs = copy
    sql(
        db,
        "UPDATE signoff_runs SET data = json_set(data, '$.input.amount', 99999) WHERE run_id = ?",
        runs["quorum"],
    )
    code, _, err = verify(db)
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith(f"run {runs['quorum']}:")]
    assert len(lines) == 2, err  # the dispatch event and the proposal both disagree
    assert "not the call its dispatch event" in err and "stored input" in err


def test_a_tenant_deleted_whole_behind_a_round_is_named(copy: Copy, tmp_path: Path) -> None:
    """Events, head, checkpoints and runs of tenant other gone: each chain left is consistent."""
    db, _ = copy
    ring = write_hmac_ring(tmp_path, "k1", signing="k1")
    done = runner.invoke(app, ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)])
    assert done.exit_code == 0, done.output
    assert "2 checkpoints signed with key 'k1' in round 1" in done.stdout
    [(number,)] = sql(db, "SELECT chain_seq FROM signoff_audit_heads WHERE tenant_id = 'other'")
    for table in (
        "signoff_audit_events",
        "signoff_audit_heads",
        "signoff_audit_checkpoints",
        "signoff_runs",
        "signoff_duplicates",
    ):
        sql(db, f"DELETE FROM {table} WHERE tenant_id = 'other'")
    code, _, err = verify(db, "--keys", str(ring))
    assert code == 1
    assert "[AUDIT_INCONSISTENT]" in err
    assert first_bad(err) == (
        f"first bad: tenant 'other': signed at #{number} in round 1 is missing: its events, "
        "chain head and checkpoints were deleted"
    )


def test_a_checkpoint_run_with_nothing_moved_writes_no_round(copy: Copy, tmp_path: Path) -> None:
    db, _ = copy
    ring = write_hmac_ring(tmp_path, "k1", signing="k1")
    checkpoint = ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)]
    assert runner.invoke(app, checkpoint).exit_code == 0
    again = runner.invoke(app, checkpoint)
    assert again.exit_code == 0
    assert again.stdout.strip() == "0 checkpoints signed with key 'k1'"
    assert sql(db, "SELECT round FROM signoff_audit_rounds") == [(1,)]
    code, out, _ = verify(db, "--keys", str(ring))
    assert code == 0 and "2 checkpoints in 1 rounds" in out


def test_no_round_is_signed_on_top_of_an_altered_one(copy: Copy, tmp_path: Path) -> None:
    """Dropping a tenant from the latest round and signing again would launder the deletion."""
    db, _ = copy
    ring = write_hmac_ring(tmp_path, "k1", signing="k1")
    checkpoint = ["audit", "checkpoint", "--database", url(db), "--keys", str(ring)]
    assert runner.invoke(app, checkpoint).exit_code == 0
    sql(db, "UPDATE signoff_audit_rounds SET heads = json_remove(heads, '$.other')")
    populate_more(db)
    refused = runner.invoke(app, checkpoint)
    assert refused.exit_code == 1
    assert "[AUDIT_INCONSISTENT]" in refused.stderr
    assert sql(db, "SELECT round FROM signoff_audit_rounds") == [(1,)]
