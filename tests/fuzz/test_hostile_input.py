"""Hostile input over every surface (contract §4, §9), fuzzed with hypothesis.

Two real servers share one database — ``signoff serve --transport http`` (spoken to in both
protocol eras: the session-based 2025-11-25 and the stateless 2026-07-28) and ``signoff serve
--transport stdio`` — and receive batches of hostile calls: nesting up to 500 deep, values
around the size limit, NUL and lone surrogates in values, keys and tool names, NaN, Infinity,
``1e400``, integers beyond 64 bits, odd keys, hostile run ids. After every batch:

- every answer is a JSON-RPC error or carries a catalog code;
- both servers still answer;
- every stored run reads back (no row a reader has to skip) and ``signoff audit verify`` is clean;
- no answer carries the planted secret, a URL with credentials, a path, SQL or a traceback.

The budget is bounded (``max_examples``) so the suite stays well under a minute per database.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from signoff.cli import app
from signoff.core.codes import Code
from signoff.store.sql import open_sql_store
from tests.fuzz.servers import FUZZ_SECRET, MODERN_META, HttpServer, StdioServer
from tests.store.conftest import POSTGRES_ENV, scratch_database

pytestmark = pytest.mark.slow

EXECUTOR_CODES = {"HTTP_UNREACHABLE", "HTTP_REQUEST_INVALID"}
# ACTION_RUNTIME_FAILED is in the catalog, but here it would mean hostile input broke signoff.
CATALOG = ({str(code) for code in Code} | EXECUTOR_CODES) - {Code.ACTION_RUNTIME_FAILED}
# Nothing an agent is told may carry these (contract §4).
FORBIDDEN = re.compile(
    rf"{re.escape(FUZZ_SECRET)}|erp_user|fuzz_user|postgresql://|sqlite\+|Traceback|"
    r"File \"/|/srv/erp|\[SQL|SELECT \*|signoff_runs|RuntimeError"
)


ERAS = ("legacy", "modern", "stdio")


class Raw(str):
    """A JSON number token written as is (``NaN``, ``1e400``): json.dumps cannot produce them."""


def to_json(value: Any) -> str:
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    return json.dumps(value)


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for index in range(depth):
        value = [value] if index % 2 else {"n": value}
    return value


ODD = ["\x00", "\ud800", "\udfff", "\u202e", "\u200b", "\ufeff", "\x1b[31m", "'; DROP TABLE x;--"]
text = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(ODD)), max_size=4).map("".join)
keys = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", "__proto__", "$ref", "constructor", "idempotency_key", "k" * 300]),
    text,
)
raw_numbers = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 30])
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
    raw_numbers.map(Raw),
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)
special = st.one_of(
    st.sampled_from([31, 33, 64, 200, 250, 500]).map(nested),
    st.sampled_from([1_000, 200_000, 300_000]).map(lambda n: "A" * n),
)
arguments = st.dictionaries(keys, st.one_of(values, special), max_size=4)
tools = st.sampled_from(
    [
        "fuzz_echo",
        "fuzz_wait",
        "fuzz_explode",
        "fuzz_http",
        "signoff_get_run",
        "signoff_list_runs",
        "signoff_cancel_run",
        "fuzz_echo\x00",
        "fuzz_\ud800echo",
        "no_such_tool",
        "t" * 300,
    ]
)
run_ids = st.one_of(text, st.just("0193c1c2-0000-7000-8000-000000000000\x00"))


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]
    era: str

    def params(self) -> dict[str, Any]:
        arguments = dict(self.arguments)
        if self.tool in ("signoff_get_run", "signoff_cancel_run"):
            arguments.setdefault("run_id", "x")
        params: dict[str, Any] = {"name": self.tool, "arguments": arguments}
        if self.era == "modern":
            params["_meta"] = MODERN_META
        return params


def calls() -> st.SearchStrategy[Call]:
    def build(tool: str, args: dict[str, Any], run_id: str, era: str) -> Call:
        if tool in ("signoff_get_run", "signoff_cancel_run"):
            args = {"run_id": run_id}
        return Call(tool, args, era)

    return st.builds(
        build, tools, arguments, run_ids, st.sampled_from(["legacy", "modern", "stdio"])
    )


@dataclass
class Deployment:
    database: str
    http: HttpServer
    stdio: StdioServer
    answers: list[str]
    run_ids: list[str]

    def send(self, call: Call) -> dict[str, Any]:
        if call.era == "stdio":
            ident = self.stdio.new_id()
            line = to_json(
                {"jsonrpc": "2.0", "id": ident, "method": "tools/call"} | {"params": call.params()}
            )
            answer = self.stdio.call(ident, line)
        else:
            ident = self.http.new_id()
            body = to_json(
                {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": call.params()}
            )
            data = body.encode("utf-8", "surrogatepass")
            response = (
                self.http.post_modern(data, "tools/call", call.tool)
                if call.era == "modern"
                else self.http.post_legacy(data)
            )
            from tests.fuzz.servers import answer_from

            answer = answer_from(response, ident)
        self.answers.append(json.dumps(answer))
        return answer


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    with _database(request.param, tmp_path_factory.mktemp("fuzz")) as url:
        http = HttpServer(url)
        stdio = StdioServer(url)
        try:
            yield Deployment(url, http, stdio, [], [])
        finally:
            http.close()
            stdio.close()


def _database(kind: str, where: Path) -> Any:
    if kind == "sqlite":
        from contextlib import nullcontext

        url = f"sqlite+aiosqlite:///{where / 'fuzz.db'}"
        CliRunner().invoke(app, ["db", "upgrade", "--database", url])
        return nullcontext(url)
    return scratch_database(POSTGRES_ENV, "PostgreSQL", migrate=True)


def check_answer(deployment: Deployment, call: Call, answer: dict[str, Any]) -> None:
    if "error" in answer:
        assert isinstance(answer["error"]["code"], int), answer
        return
    content = answer["result"].get("structuredContent")
    assert isinstance(content, dict), answer
    assert content.get("code") in CATALOG, content
    if content.get("run_id") and not call.tool.startswith("signoff_"):
        deployment.run_ids.append(content["run_id"])  # every proposal is recorded


async def every_run_reads_back(url: str, answered: list[str]) -> int:
    """Every run listed reads back, and every run an answer named was recorded."""
    store = await open_sql_store(url, upgrade=False)
    try:
        async with store.unit() as unit:
            for run_id in answered:
                assert await unit.runs.get(run_id) is not None, f"run {run_id} was not recorded"
        seen = 0
        before: str | None = None
        while True:
            async with store.unit() as unit:
                page = await unit.runs.list(limit=200, before_run_id=before)
                for run in page:
                    assert await unit.runs.get(run.run_id) is not None
            seen += len(page)
            if len(page) < 200:
                break
            before = page[-1].run_id
        assert store.decode_faults.rows() == []
        return seen
    finally:
        await store.close()


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@given(batch=st.lists(calls(), min_size=1, max_size=4))
@example(batch=[Call("fuzz_echo", {"deep": nested(40)}, era) for era in ERAS])
@example(batch=[Call("fuzz_wait", {"deep": nested(250)}, era) for era in ERAS])
@example(batch=[Call("fuzz_echo\x00", {}, "legacy"), Call("fuzz_\ud800", {}, "stdio")])
@example(batch=[Call("fuzz_echo", {"n": "a\x00b", "\ud800": 1}, era) for era in ERAS])
@example(batch=[Call("fuzz_echo", {"x": Raw(n)}, "legacy") for n in ("NaN", "1e400", "1" * 30)])
@example(batch=[Call("fuzz_wait", {"big": "A" * 3_000_000}, "legacy")])
@example(batch=[Call("fuzz_explode", {}, "legacy"), Call("fuzz_http", {}, "modern")])
@example(batch=[Call("signoff_get_run", {"run_id": "r\x00"}, era) for era in ERAS])
def test_hostile_calls_are_answered_contained_and_never_disclose_internals(
    deployment: Deployment, batch: list[Call]
) -> None:
    deployment.answers.clear()
    deployment.run_ids.clear()
    for call in batch:
        check_answer(deployment, call, deployment.send(call))
    # Both servers still answer.
    alive = Call("signoff_list_runs", {}, "legacy")
    assert deployment.send(alive)["result"]["structuredContent"]["code"] == Code.SUCCEEDED
    assert deployment.send(Call("signoff_list_runs", {}, "stdio"))["result"]["isError"] is False
    # Every stored run reads back, and the audit trail explains every run.
    assert asyncio.run(every_run_reads_back(deployment.database, deployment.run_ids)) >= 0
    verify = CliRunner().invoke(app, ["audit", "verify", "--database", deployment.database])
    assert verify.exit_code == 0, verify.output
    for text in deployment.answers:
        leak = FORBIDDEN.search(text)
        assert leak is None, f"an answer discloses {leak.group()!r}: {text[:300]}"
