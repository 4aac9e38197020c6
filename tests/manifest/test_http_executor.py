"""The HTTP executor against a real server on loopback: what it sends, how it classifies."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
from signoff.manifest import HttpExecutor, load_manifest_dir
from tests.helpers import memory_runtime, proposal
from tests.manifest.support import edited, write

CLIENT_TIMEOUT = 0.3  # the executor's own deadline for the "never answers" endpoint


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Endpoint:
    base: str
    seen: list[Seen] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

        def _reply(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length) if length else b""
            endpoint.seen.append(
                Seen(self.command, self.path, dict(self.headers), json.loads(raw) if raw else None)
            )
            route = self.path.rstrip("/").rsplit("/", 1)[-1]
            if route == "ok":
                self._reply(200, json.dumps({"invoice": "INV-1", "state": "done"}).encode())
            elif route == "empty":
                self._reply(204, b"")
            elif route == "text":
                self._reply(200, b"done", "text/plain")
            elif route == "array":
                self._reply(201, b"[1, 2]")
            elif route == "missing":
                self._reply(404, json.dumps({"error": "no such invoice"}).encode())
            elif route == "invalid":
                self._reply(422, b"{}")
            elif route == "boom":
                self._reply(500, b"oops", "text/plain")
            elif route == "unavailable":
                self._reply(503, b"")
            elif route == "moved":
                self._reply(302, b"")
            elif route == "slow":
                endpoint.release.wait(timeout=30)  # held until the test ends
                self._reply(200, b"{}")
            elif route == "drop":
                # The request arrived; the connection dies before any response.
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    result = Endpoint(base="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(result))
    server.daemon_threads = True
    result.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield result
    finally:
        result.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A loopback port that is bound but not listening: connecting is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/ok"
    finally:
        sock.close()


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


async def test_the_request_carries_the_input_and_signoff_headers(endpoint: Endpoint) -> None:
    executor = HttpExecutor(
        url=f"{endpoint.base}/erp/ok", method="PATCH", headers={"Authorization": "Bearer t"}
    )

    result = await executor.send(context(invoice_id="INV-7", amount=12.5))

    assert result.status is ExecutionStatus.SUCCEEDED
    assert result.output == {"invoice": "INV-1", "state": "done"}
    (seen,) = endpoint.seen
    assert (seen.method, seen.path) == ("PATCH", "/erp/ok")
    assert seen.body == {"invoice_id": "INV-7", "amount": 12.5}
    assert seen.headers["Idempotency-Key"] == "run-1:att-1"
    assert seen.headers["X-Signoff-Run-Id"] == "run-1"
    assert seen.headers["X-Signoff-Tenant"] == "acme"
    assert seen.headers["Authorization"] == "Bearer t"
    assert seen.headers["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("route", "idempotent", "status", "code", "retry"),
    [
        ("ok", False, ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER),
        ("empty", False, ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER),
        ("text", False, ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER),
        ("array", False, ExecutionStatus.SUCCEEDED, Code.SUCCEEDED, RetryDisposition.NEVER),
        ("missing", False, ExecutionStatus.FAILED, "INVOICE_NOT_FOUND", RetryDisposition.AFTER_CORRECTION),
        ("invalid", True, ExecutionStatus.FAILED, "HTTP_CLIENT_ERROR", RetryDisposition.AFTER_CORRECTION),
        ("boom", False, ExecutionStatus.FAILED, "HTTP_SERVER_ERROR", RetryDisposition.MANUAL_REVIEW),
        ("boom", True, ExecutionStatus.FAILED, "HTTP_SERVER_ERROR", RetryDisposition.AFTER_BACKOFF),
        ("unavailable", False, ExecutionStatus.FAILED, "ERP_DOWN", RetryDisposition.MANUAL_REVIEW),
        ("moved", True, ExecutionStatus.FAILED, "HTTP_UNEXPECTED_STATUS", RetryDisposition.MANUAL_REVIEW),
        ("slow", False, ExecutionStatus.FAILED, "HTTP_TIMEOUT", RetryDisposition.MANUAL_REVIEW),
        ("slow", True, ExecutionStatus.FAILED, "HTTP_TIMEOUT", RetryDisposition.AFTER_BACKOFF),
        ("drop", False, ExecutionStatus.FAILED, "HTTP_CONNECTION_LOST", RetryDisposition.MANUAL_REVIEW),
        ("drop", True, ExecutionStatus.FAILED, "HTTP_CONNECTION_LOST", RetryDisposition.AFTER_BACKOFF),
    ],
)  # fmt: skip
async def test_outcomes_are_classified_explicitly(
    endpoint: Endpoint,
    route: str,
    idempotent: bool,
    status: ExecutionStatus,
    code: str,
    retry: RetryDisposition,
) -> None:
    executor = HttpExecutor(
        url=f"{endpoint.base}/{route}",
        timeout=CLIENT_TIMEOUT,
        idempotent=idempotent,
        status_codes={404: "INVOICE_NOT_FOUND", 503: "ERP_DOWN"},
    )

    result = await executor.send(context())

    assert (result.status, result.code, result.retry) == (status, code, retry)
    assert len(endpoint.seen) == 1  # each outcome is about a request that did arrive


async def test_a_client_error_reports_the_status_and_body(endpoint: Endpoint) -> None:
    result = await HttpExecutor(url=f"{endpoint.base}/missing").send(context())

    assert result.output == {"http_status": 404, "body": {"error": "no such invoice"}}


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_refused_connection_sent_nothing_and_may_be_retried(
    refused_url: str, idempotent: bool
) -> None:
    result = await HttpExecutor(url=refused_url, idempotent=idempotent).send(context())

    assert (result.status, result.code, result.retry) == (
        ExecutionStatus.FAILED,
        "HTTP_UNREACHABLE",
        RetryDisposition.AFTER_BACKOFF,
    )


async def test_a_manifest_http_action_runs_through_the_governed_pipeline(
    endpoint: Endpoint, tmp_path: Path
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
    endpoint: Endpoint, tmp_path: Path
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
