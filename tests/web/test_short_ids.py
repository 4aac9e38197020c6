"""Short run ids over the approvers' API: the random tail (or a start of it) names a run among
the runs the caller may see; several readable matches answer ``RUN_ID_AMBIGUOUS``; a run the
caller may not see is never named and never makes a short id ambiguous."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from signoff import Code
from signoff.core import pipeline
from signoff.core.clock import new_run_id
from signoff.core.short_ids import RUN_ID_AMBIGUOUS, short_id
from tests.web.support import Site, bearer

LEAD: dict[str, Any] = {"sub": "lead-1", "roles": ("billing-lead",)}


@pytest.fixture
def tails(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tails the next runs get, in order (a real UUIDv7 head, a chosen random tail)."""
    wanted: list[str] = []

    def chosen() -> Iterator[str]:
        while True:
            real = new_run_id()
            yield real[:-12] + wanted.pop(0) if wanted else real

    ids = chosen()
    monkeypatch.setattr(pipeline, "new_run_id", lambda: next(ids))
    return wanted


async def test_a_short_id_and_any_start_of_it_of_six_characters_name_the_run(
    site: Site, tails: list[str]
) -> None:
    tails.append("4b5c6d7e8f90")
    pending = await site.propose()
    assert short_id(pending.run_id) == "4b5c6d7e8f90"
    async with site.client(bearer(**LEAD)) as http:
        whole = await http.get("/api/runs/4b5c6d7e8f90")
        start = await http.get("/api/runs/4B5C6D")
        approved = await http.post(
            "/api/runs/4b5c6d7/approve", json={"reason": "ok", "expected_version": 1}
        )
    assert whole.status_code == start.status_code == 200
    assert whole.json()["run_id"] == start.json()["run_id"] == pending.run_id
    assert (approved.status_code, approved.json()["code"]) == (200, Code.SUCCEEDED)
    assert approved.json()["outcome"]["run_id"] == pending.run_id


async def test_a_start_shared_by_two_readable_runs_is_ambiguous_and_names_both(
    site: Site, tails: list[str]
) -> None:
    tails.extend(["abcdef111111", "abcdef222222"])
    first = await site.propose(key="k-1")
    second = await site.propose(key="k-2")
    async with site.client(bearer(**LEAD)) as http:
        ambiguous = await http.post("/api/runs/abcdef/approve")
        longer = await http.get("/api/runs/abcdef2")
    assert (ambiguous.status_code, ambiguous.json()["code"]) == (409, RUN_ID_AMBIGUOUS)
    assert set(ambiguous.json()["candidates"]) == {first.run_id, second.run_id}
    assert longer.json()["run_id"] == second.run_id


async def test_another_tenants_run_is_never_named_by_a_short_id_nor_makes_one_ambiguous(
    site: Site, tails: list[str]
) -> None:
    tails.extend(["abcdef111111", "abcdef222222"])
    ours = await site.propose(key="k-1")
    await site.propose(key="k-2", tenant="globex")
    async with site.client(bearer(**LEAD)) as http:
        shared = await http.get("/api/runs/abcdef")
        theirs = await http.get("/api/runs/abcdef2")
        missing = await http.get("/api/runs/0190aaaa-0000-7000-8000-000000000000")
    assert shared.json()["run_id"] == ours.run_id
    assert (theirs.status_code, theirs.json()) == (404, missing.json())
    assert theirs.json()["code"] == Code.ACTION_RUN_NOT_FOUND


async def test_fewer_than_six_characters_are_not_a_short_id(site: Site, tails: list[str]) -> None:
    tails.append("4b5c6d7e8f90")
    await site.propose()
    async with site.client(bearer(**LEAD)) as http:
        response = await http.get("/api/runs/4b5c6")
    assert (response.status_code, response.json()["code"]) == (404, Code.ACTION_RUN_NOT_FOUND)
