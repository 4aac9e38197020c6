"""A finished run's receipt from the approvers' API and the inbox (docs/receipts.md): read with
the run's own visibility, sensitive values masked, and verifiable with the public key alone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from signoff.audit.checkpoints import checkpoint_heads
from signoff.audit.keys import KeyRing, generate_ed25519
from signoff.audit.receipt_check import ring_check, verify_receipt
from signoff.surfaces.access.scopes import DEFAULT_PROPOSE
from tests.web.support import Site, api_decide, bearer, site_for_tests, token
from tests.web.test_inbox import LEAD, sign_in

SECRET_REASON = "Jane Doe"


@pytest.fixture
def ring(tmp_path: Path) -> KeyRing:
    generate_ed25519(tmp_path, "k1")
    document = {
        "signing_key": "k1",
        "keys": [{"id": "k1", "algorithm": "ed25519", "private_key_file": "k1.pem"}],
    }
    return KeyRing.parse(document, base=tmp_path)


@pytest.fixture
async def signing_site(ring: KeyRing) -> AsyncIterator[Site]:
    async with site_for_tests(receipt_keys=lambda: ring) as built:
        yield built


async def _decided(site: Site, while_waiting: str = "RECEIPT_RUN_NOT_FINISHED") -> str:
    pending = await site.propose({"invoice_id": "INV-7", "amount": 4200, "reason": SECRET_REASON})
    async with site.client(bearer(**LEAD)) as http:
        waiting = await http.get(f"/api/runs/{pending.run_id}/receipt")
        assert waiting.json()["code"] == while_waiting
        approved = await api_decide(site, http, pending.run_id)
        assert approved.json()["code"] == "SUCCEEDED", approved.json()
    await site.runtime.drain()
    return pending.run_id


async def test_an_approver_downloads_a_decided_runs_receipt_once_it_is_checkpointed(
    signing_site: Site, ring: KeyRing
) -> None:
    run_id = await _decided(signing_site)
    async with signing_site.client(bearer(**LEAD)) as http:
        early = await http.get(f"/api/runs/{run_id}/receipt")
        assert (early.status_code, early.json()["code"]) == (409, "RECEIPT_NOT_ANCHORED")
        await checkpoint_heads(signing_site.store, ring, signing_site.runtime.now())
        answer = await http.get(f"/api/runs/{run_id[-12:]}/receipt")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-disposition"] == f'attachment; filename="receipt-{run_id}.json"'
    document: dict[str, Any] = answer.json()
    # The input's sensitive field is masked (this test executor echoes its input into an output
    # the manifest does not declare sensitive, which every surface shows as it is).
    assert SECRET_REASON not in json.dumps(document["substance"]["input"])
    assert SECRET_REASON not in json.dumps(document["chain"])
    assert "masked" in document["substance"]["input"] and not document["revealed"]
    summary = verify_receipt(document, ring_check(ring))
    assert summary.run_id == run_id and summary.masked_values == 1


async def test_a_run_the_caller_may_not_read_answers_like_a_missing_one(
    signing_site: Site, ring: KeyRing
) -> None:
    run_id = await _decided(signing_site)
    await checkpoint_heads(signing_site.store, ring, signing_site.runtime.now())
    missing_id = run_id[:-4] + "0000"
    answers = []
    for claims, path_id in [
        ({"sub": "lead-2"}, run_id),  # same role, did not decide, not waiting
        ({**LEAD, "tenant": "other"}, run_id),
        (LEAD, missing_id),
    ]:
        async with signing_site.client(bearer(**claims)) as http:
            response = await http.get(f"/api/runs/{path_id}/receipt")
        answers.append((response.status_code, response.json()))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0][0] == 404 and answers[0][1]["code"] == "ACTION_RUN_NOT_FOUND"
    async with signing_site.client(bearer(scopes=(DEFAULT_PROPOSE,))) as http:
        agent = await http.get(f"/api/runs/{run_id}/receipt")
    assert agent.status_code == 403


async def test_the_inbox_links_the_receipt_of_a_finished_run(
    signing_site: Site, ring: KeyRing
) -> None:
    run_id = await _decided(signing_site)
    await checkpoint_heads(signing_site.store, ring, signing_site.runtime.now())
    async with signing_site.client() as http:
        await sign_in(http, token(**LEAD))
        page = await http.get(f"/approvals/runs/{run_id}")
        link = f'href="/approvals/runs/{run_id}/receipt"'
        assert link in page.text
        download = await http.get(f"/approvals/runs/{run_id}/receipt")
        other = await http.get("/approvals/runs/not-a-run/receipt")
    assert download.status_code == 200
    verify_receipt(download.json(), ring_check(ring))
    assert other.status_code == 404


async def test_a_server_without_a_signing_key_says_so(site: Site) -> None:
    run_id = await _decided(site, while_waiting="RECEIPT_KEYS_MISSING")
    async with site.client(bearer(**LEAD)) as http:
        answer = await http.get(f"/api/runs/{run_id}/receipt")
    assert (answer.status_code, answer.json()["code"]) == (503, "RECEIPT_KEYS_MISSING")
