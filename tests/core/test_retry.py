"""Side effects never doubled: in-run retries with the same operation id against a loopback
payment server that applies a payment and answers only after the client gave up."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from signoff import ExecutionContext, ExecutionResult, ExecutionStatus, RetryDisposition
from signoff.audit_check import check_trail
from signoff.core.codes import Code
from signoff.core.definition import RetrySpec
from signoff.core.registry import ActionRegistry
from signoff.core.retry import backoff_delay
from signoff.core.runtime import Runtime
from signoff.executors.http.executor import HttpExecutor
from signoff.manifest import ProblemCode, load_manifest_dir
from signoff.store.memory import InMemoryStore
from tests.helpers import NO_APPROVAL, definition, proposal
from tests.loopback import Loopback, Reply, Seen, refused_port, serving
from tests.manifest.support import edited, line_of, only_problem, write

CLIENT_TIMEOUT = 0.3  # the executor gives up on the first, slow answer after this long


@dataclass
class Payments:
    """An idempotent payment endpoint: one payment per Idempotency-Key, the first answer late."""

    applied: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    slow_answers: int = 1
    released: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def route(self, seen: Seen) -> Reply:
        key = seen.headers["Idempotency-Key"]
        with self.lock:
            self.requests.append(key)
            late = len(self.requests) <= self.slow_answers
            payment = self.applied.setdefault(key, {"payment": f"pay_{len(self.applied) + 1}"})
        if late:  # applied, but the answer comes after the client's timeout
            self.released.wait(timeout=30)
        return Reply(200, json.dumps(payment).encode())


@pytest.fixture
def payments() -> Iterator[tuple[Payments, Loopback]]:
    server = Payments()
    with serving({"payments": server.route}) as loopback:
        try:
            yield server, loopback
        finally:
            server.released.set()


@dataclass
class Sleeps:
    seconds: list[float] = field(default_factory=list)

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def runtime(executor: Any, sleeps: Sleeps, **overrides: Any) -> Runtime:
    action = definition(executor, approval=NO_APPROVAL, **overrides)
    return Runtime(ActionRegistry([action]), InMemoryStore(), sleep=sleeps)


RETRY = RetrySpec(attempts=3, backoff=timedelta(seconds=2))


async def test_a_timeout_after_the_payment_was_applied_is_retried_in_the_run_and_pays_once(
    payments: tuple[Payments, Loopback],
) -> None:
    server, loopback = payments
    sleeps = Sleeps()
    executor = HttpExecutor(url=loopback.url("/payments"), timeout=CLIENT_TIMEOUT)
    governed = runtime(executor, sleeps, executor_idempotent=True, retry=RETRY)

    outcome = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))

    assert (outcome.status, outcome.code) == (ExecutionStatus.SUCCEEDED, Code.SUCCEEDED)
    assert outcome.output == {"payment": "pay_1"}
    assert len(server.applied) == 1  # one payment
    assert len(set(server.requests)) == 1 and len(server.requests) == 2  # one key, two sends
    assert server.requests[0].startswith(outcome.run_id + ":")
    assert len(sleeps.seconds) == 1 and 1.0 <= sleeps.seconds[0] < 2.0
    trail = await governed.audit_trail(outcome.run_id, "acme")
    retried = [e for e in trail if e.kind == "attempt_failed"]
    assert [(e.code, (e.data or {}).get("attempt")) for e in retried] == [("HTTP_TIMEOUT", 1)]
    assert (retried[0].data or {})["operation_id"] == server.requests[0]
    run = await governed.get_run(outcome.run_id, "acme")
    assert run is not None and check_trail(run, trail) == []  # `signoff audit verify` agrees


async def test_the_same_timeout_with_a_non_idempotent_executor_needs_review_and_pays_once(
    payments: tuple[Payments, Loopback],
) -> None:
    server, loopback = payments
    sleeps = Sleeps()
    executor = HttpExecutor(url=loopback.url("/payments"), timeout=CLIENT_TIMEOUT)
    governed = runtime(executor, sleeps, executor_idempotent=False, retry=RETRY)

    outcome = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))

    assert (outcome.status, outcome.code, outcome.retry) == (
        ExecutionStatus.FAILED,
        "HTTP_TIMEOUT",
        RetryDisposition.MANUAL_REVIEW,
    )
    assert len(server.applied) == 1 and len(server.requests) == 1
    assert sleeps.seconds == []


async def test_when_the_attempts_run_out_the_answer_is_manual_review_with_one_payment(
    payments: tuple[Payments, Loopback],
) -> None:
    server, loopback = payments
    server.slow_answers = 10
    sleeps = Sleeps()
    executor = HttpExecutor(url=loopback.url("/payments"), timeout=CLIENT_TIMEOUT)
    governed = runtime(executor, sleeps, executor_idempotent=True, retry=RETRY)

    outcome = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))

    assert (outcome.code, outcome.retry) == ("HTTP_TIMEOUT", RetryDisposition.MANUAL_REVIEW)
    assert len(server.applied) == 1
    assert len(server.requests) == 3 and len(set(server.requests)) == 1
    assert len(sleeps.seconds) == 2
    assert 1.0 <= sleeps.seconds[0] < 2.0 and 2.0 <= sleeps.seconds[1] < 4.0


@pytest.mark.parametrize("retry", [None, RETRY])
async def test_a_refused_connection_sent_nothing_so_the_answer_is_after_backoff(
    retry: RetrySpec | None,
) -> None:
    sleeps = Sleeps()
    with refused_port() as port:
        executor = HttpExecutor(url=f"http://127.0.0.1:{port}/payments", timeout=CLIENT_TIMEOUT)
        governed = runtime(executor, sleeps, executor_idempotent=False, retry=retry)

        outcome = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))

    assert (outcome.status, outcome.code, outcome.retry) == (
        ExecutionStatus.FAILED,
        "HTTP_UNREACHABLE",
        RetryDisposition.AFTER_BACKOFF,
    )
    assert len(sleeps.seconds) == (0 if retry is None else 2)


async def test_an_executors_own_retryable_failure_is_tried_again_with_the_same_operation_id() -> (
    None
):
    seen: list[str] = []

    def flaky(context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
        seen.append(context.operation_id)
        if len(seen) < 3:
            return ExecutionResult.retryable_failure("LEDGER_BUSY", "try again")
        return {"ok": True}

    sleeps = Sleeps()
    governed = runtime(flaky, sleeps, retry=RETRY)

    outcome = await governed.propose(proposal({"invoice_id": "INV-1", "amount": 10}))

    assert outcome.status is ExecutionStatus.SUCCEEDED
    assert len(seen) == 3 and len(set(seen)) == 1
    trail = await governed.audit_trail(outcome.run_id, "acme")
    assert [e.code for e in trail if e.kind == "attempt_failed"] == ["LEDGER_BUSY"] * 2


@pytest.mark.parametrize(
    ("failed", "fraction", "expected"),
    [(1, 0.0, 1.0), (1, 0.999, 1.999), (2, 0.0, 2.0), (3, 0.5, 6.0)],
)
def test_the_backoff_doubles_and_the_jitter_keeps_it_between_half_and_all(
    failed: int, fraction: float, expected: float
) -> None:
    assert backoff_delay(2.0, failed, fraction) == pytest.approx(expected)


def test_executor_retry_in_a_manifest_reaches_the_definition(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.yaml",
        edited(
            "    idempotent: true\n",
            "    idempotent: true\n    retry: {attempts: 3, backoff: 500ms}\n",
        ),
    )

    (action,) = load_manifest_dir(tmp_path, environ={})

    assert action.definition.retry == RetrySpec(attempts=3, backoff=timedelta(milliseconds=500))


def test_retry_on_deferred_work_is_a_manifest_error(tmp_path: Path) -> None:
    deferred = "  executor:\n    mode: deferred\n    python: tests.manifest.hooks:echo\n    timeout: 1h\n    retry: {attempts: 2}\n"
    text = edited(
        "  executor:\n    python: tests.manifest.hooks:echo\n    timeout: 5s\n    idempotent: true\n",
        deferred,
    )
    write(tmp_path, "a.yaml", text)

    problem = only_problem(tmp_path, {})

    assert (problem.code, problem.path, problem.line) == (
        ProblemCode.INVALID_VALUE,
        "spec.executor.retry",
        line_of(text, "retry:"),
    )
