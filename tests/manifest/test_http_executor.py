"""The HTTP executor against a real server on loopback: what it sends, how it classifies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from signoff import (
    ExecutionContext,
    ExecutionResult,
    ExecutionStatus,
    Principal,
    RetryDisposition,
)
from signoff.core.codes import Code
from signoff.executors.http.response import ResponseSpec
from signoff.manifest import HttpExecutor, load_manifest_dir
from tests.helpers import memory_runtime, proposal
from tests.loopback import Loopback, Reply, Route, Seen, refused_port, serving
from tests.manifest.support import edited, write

# The executor's own deadline for the "never answers" endpoint. Every other route gets the default
# (10 s): a short deadline there would turn a starved event loop into HTTP_UNREACHABLE.
CLIENT_TIMEOUT = 2.0


def _json(value: Any, status: int = 200) -> Route:
    return lambda _: Reply(status, json.dumps(value).encode())


def _slow(loopback: list[Loopback]) -> Route:
    def route(_: Seen) -> Reply:
        loopback[0].release.wait(timeout=30)  # held until the test ends
        return Reply(200, b"{}")

    return route


@pytest.fixture
def endpoint() -> Iterator[Loopback]:
    holder: list[Loopback] = []
    routes: dict[str, Route] = {
        "ok": _json({"invoice": "INV-1", "state": "done"}),
        "empty": lambda _: Reply(204),
        "text": lambda _: Reply(200, b"done", "text/plain"),
        "array": lambda _: Reply(201, b"[1, 2]"),
        "missing": _json({"error": "no such invoice"}, 404),
        "invalid": lambda _: Reply(422, b"{}"),
        "boom": lambda _: Reply(500, b"oops secret upstream detail", "text/plain"),
        "unavailable": lambda _: Reply(503),
        "moved": lambda _: Reply(302),
        "slow": _slow(holder),
        "drop": lambda _: Reply(drop=True),
    }
    with serving(routes) as loopback:
        holder.append(loopback)
        yield loopback


@pytest.fixture
def refused_url() -> Iterator[str]:
    with refused_port() as port:
        yield f"http://127.0.0.1:{port}/ok"


def context(**input: Any) -> ExecutionContext:
    return ExecutionContext(
        run_id="run-1",
        action_id="erp.update",
        tenant_id="acme",
        principal=Principal(id="agent-1", roles=("billing",)),
        input=input or {"invoice_id": "INV-1"},
        resource="invoice/INV-1",
        attempt_token="att-1",
        operation_id="run-1:att-1",
    )


async def test_the_request_carries_the_input_and_signoff_headers(endpoint: Loopback) -> None:
    executor = HttpExecutor(
        url=f"{endpoint.base}/erp/ok", method="PATCH", headers={"Authorization": "Bearer t"}
    )

    result = await executor.send(context(invoice_id="INV-7", amount=12.5))

    assert result.status is ExecutionStatus.SUCCEEDED
    assert result.output == {"invoice": "INV-1", "state": "done"}
    (seen,) = endpoint.seen
    assert (seen.method, seen.target) == ("PATCH", "/erp/ok")
    assert json.loads(seen.body) == {"invoice_id": "INV-7", "amount": 12.5}
    assert seen.headers["Idempotency-Key"] == "run-1:att-1"
    assert seen.headers["X-Signoff-Run-Id"] == "run-1"
    assert seen.headers["X-Signoff-Tenant"] == "acme"
    assert seen.headers["Authorization"] == "Bearer t"
    assert seen.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("route", "status", "code", "retry", "possibly_applied"),
    [
        ("ok", ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER, False),
        ("empty", ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER, False),
        ("text", ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER, False),
        ("array", ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER, False),
        ("missing", ExecutionStatus.FAILED, "INVOICE_NOT_FOUND", RetryDisposition.AFTER_CORRECTION, False),
        ("invalid", ExecutionStatus.FAILED, "HTTP_CLIENT_ERROR", RetryDisposition.AFTER_CORRECTION, False),
        ("boom", ExecutionStatus.FAILED, "HTTP_SERVER_ERROR", RetryDisposition.MANUAL_REVIEW, True),
        ("unavailable", ExecutionStatus.FAILED, "ERP_DOWN", RetryDisposition.MANUAL_REVIEW, True),
        ("moved", ExecutionStatus.FAILED, "HTTP_UNEXPECTED_STATUS", RetryDisposition.MANUAL_REVIEW, False),
        ("slow", ExecutionStatus.FAILED, "HTTP_TIMEOUT", RetryDisposition.MANUAL_REVIEW, True),
        ("drop", ExecutionStatus.FAILED, "HTTP_CONNECTION_LOST", RetryDisposition.MANUAL_REVIEW, True),
    ],
)  # fmt: skip
async def test_outcomes_are_classified_explicitly(
    endpoint: Loopback,
    route: str,
    status: ExecutionStatus,
    code: str,
    retry: RetryDisposition,
    possibly_applied: bool,
) -> None:
    executor = HttpExecutor(
        url=f"{endpoint.base}/{route}",
        timeout=CLIENT_TIMEOUT if route == "slow" else 10.0,
        response=ResponseSpec(status_codes={404: "INVOICE_NOT_FOUND", 503: "ERP_DOWN"}),
    )

    result = await executor.send(context())
    assert endpoint.arrived.wait(timeout=30)  # the server thread may record it after we gave up

    assert (result.status, result.code, result.retry) == (status, code, retry)
    assert result.possibly_applied is possibly_applied
    assert endpoint.base not in result.message and "secret" not in result.message
    assert len(endpoint.seen) == 1  # each outcome is about a request that did arrive


async def test_a_failure_reports_the_status_but_never_the_upstream_body(
    endpoint: Loopback,
) -> None:
    missing = await HttpExecutor(url=f"{endpoint.base}/missing").send(context())
    boom = await HttpExecutor(url=f"{endpoint.base}/boom").send(context())

    assert missing.output == {"http_status": 404}
    assert boom.output == {"http_status": 500}
    assert "oops" not in boom.model_dump_json()


async def test_a_refused_connection_sent_nothing_and_may_be_retried(refused_url: str) -> None:
    result = await HttpExecutor(url=refused_url).send(context())

    assert (result.status, result.code, result.retry) == (
        ExecutionStatus.FAILED,
        "HTTP_UNREACHABLE",
        RetryDisposition.AFTER_BACKOFF,
    )
    assert not result.possibly_applied
    assert "127.0.0.1" not in result.message


async def test_a_manifest_http_action_runs_through_the_governed_pipeline(
    endpoint: Loopback, tmp_path: Path
) -> None:
    host, port = endpoint.base.removeprefix("http://").split(":")
    text = edited(
        "    python: tests.manifest.hooks:echo\n",
        '    http: {url: "http://${ERP_HOST}:${ERP_PORT}/erp/ok", method: POST}\n',
        edited('when: "input.amount > 1000.0"', "when: false"),
    )
    write(tmp_path, "a.yaml", text)
    (action,) = load_manifest_dir(tmp_path, environ={"ERP_HOST": host, "ERP_PORT": port})
    runtime = memory_runtime(action.definition)

    outcome = await runtime.propose(
        proposal({"invoice_id": "INV-9", "amount": 10.0}, action="demo.act")
    )

    assert (outcome.status, outcome.code) == (ExecutionStatus.SUCCEEDED, Code.SUCCEEDED)
    assert outcome.output == {"invoice": "INV-1", "state": "done"}
    (seen,) = endpoint.seen
    assert seen.headers["Idempotency-Key"].startswith(outcome.run_id + ":")
    assert seen.headers["X-Signoff-Tenant"] == "acme"


async def test_a_deferred_http_action_waits_for_its_completion(
    endpoint: Loopback, tmp_path: Path
) -> None:
    text = edited(
        "    python: tests.manifest.hooks:echo\n    timeout: 5s\n",
        f"    mode: deferred\n    timeout: 1h\n    http: {{url: '{endpoint.base}/erp/ok'}}\n",
        edited('when: "input.amount > 1000.0"', "when: false"),
    )
    write(tmp_path, "a.yaml", text)
    (action,) = load_manifest_dir(tmp_path, environ={})
    runtime = memory_runtime(action.definition)

    accepted = await runtime.propose(
        proposal({"invoice_id": "INV-9", "amount": 10.0}, action="demo.act")
    )
    run = await runtime.get_run(accepted.run_id, "acme")
    assert run is not None and run.attempt_token is not None
    completed = await runtime.complete(
        run.run_id, run.attempt_token, ExecutionResult.succeeded({"erp": "done"})
    )

    assert (accepted.status, accepted.code) == (ExecutionStatus.ACCEPTED, Code.ACTION_DEFERRED)
    assert completed.outcome is not None and completed.outcome.output == {"erp": "done"}
    assert len(endpoint.seen) == 1
