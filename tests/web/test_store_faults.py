"""A store fault on the HTTP surfaces answers a plain 500 with a stable code, never its text."""

from __future__ import annotations

from tests.surfaces.test_no_internals import FaultyStore, leaks
from tests.web.support import bearer, hidden, site_for_tests, token


async def test_a_store_fault_on_the_api_is_a_500_json_answer_with_a_code_and_no_sql() -> None:
    store = FaultyStore()
    async with site_for_tests(store) as site:
        client = site.client(bearer())
        store.failing = True
        listing = await client.get("/api/approvals")
        run = await client.get("/api/runs/0193c1c2-0000-7000-8000-000000000000")
        store.failing = False
        after = await client.get("/api/approvals")
    for answer in (listing, run):
        assert answer.status_code == 500
        assert answer.json()["code"] == "ACTION_RUNTIME_FAILED"
        assert leaks(answer.text) == []
    assert after.status_code == 200


async def test_a_store_fault_in_the_inbox_is_a_plain_500_page_with_the_code() -> None:
    store = FaultyStore()
    async with site_for_tests(store) as site:
        client = site.client()
        form = await client.get("/approvals/sign-in")
        signed_in = await client.post(
            "/approvals/sign-in",
            data={"csrf": hidden(form.text, "csrf"), "token": token(), "next": "/approvals"},
        )
        assert signed_in.status_code == 303
        store.failing = True
        page = await client.get("/approvals")
        store.failing = False
    assert page.status_code == 500
    assert page.headers["content-type"].startswith("text/html")
    assert "ACTION_RUNTIME_FAILED" in page.text
    assert leaks(page.text) == []
