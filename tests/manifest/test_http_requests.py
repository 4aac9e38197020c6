"""The HTTP executor for real APIs, against a real loopback server: path and query parameters,
body templates, form encoding, bodyless methods, the response mapping and size limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import pytest

from signoff import ExecutionContext, ExecutionStatus, Principal, RetryDisposition
from signoff.core.codes import Code
from signoff.executors.http.executor import HttpExecutor
from signoff.executors.http.response import CodeRule, ResponseSpec
from signoff.executors.http.template import parse_reference
from signoff.manifest import ProblemCode, load_manifest_dir
from tests.helpers import memory_runtime, proposal
from tests.loopback import Loopback, Reply, Seen, serving
from tests.manifest.support import edited, line_of, problems, write

PYTHON = (
    "  executor:\n    python: tests.manifest.hooks:echo\n    timeout: 5s\n    idempotent: true\n"
)
REFUND = {"id": "re_1", "status": "succeeded", "secret": "internal"}


def _refund(_: Seen) -> Reply:
    return Reply(200, json.dumps(REFUND).encode(), headers={"Request-Id": "req_9"})


def _declined(seen: Seen) -> Reply:
    code = "card_declined" if b"declined" in seen.body else "other"
    return Reply(402, json.dumps({"error": {"code": code}}).encode())


@pytest.fixture
def api() -> Iterator[Loopback]:
    routes = {
        "refund": _refund,
        "ok": lambda _: Reply(200, b"{}"),
        "declined": _declined,
        "down": lambda _: Reply(502, b"{}"),
        "failed": lambda _: Reply(200, b'{"status": "failed"}'),
        "big": lambda _: Reply(200, b'{"pad": "' + b"x" * 5000 + b'"}'),
        "big-chunked": lambda _: Reply(200, b'{"pad": "' + b"x" * 5000 + b'"}', chunked=True),
    }
    with serving(routes) as loopback:
        yield loopback


def context(**data: Any) -> ExecutionContext:
    return ExecutionContext(
        run_id="run-1",
        action_id="payments.refund",
        tenant_id="acme",
        principal=Principal(id="agent-1", roles=("billing",)),
        input=data,
        resource=None,
        attempt_token="att-1",
        operation_id="run-1:att-1",
    )


async def test_path_parameters_are_filled_from_the_input_one_encoded_segment_each(
    api: Loopback,
) -> None:
    executor = HttpExecutor(url=api.url("/charges/{{ input.charge_id }}/v{{input.n}}/ok"))

    result = await executor.send(context(charge_id="ch 1/../x?y", n=2))

    assert result.status is ExecutionStatus.SUCCEEDED
    assert api.seen[0].target == "/charges/ch%201%2F..%2Fx%3Fy/v2/ok"


@pytest.mark.parametrize("value", ["..", ".", "", None, {"a": 1}])
async def test_a_path_parameter_that_cannot_be_a_segment_sends_nothing(
    api: Loopback, value: Any
) -> None:
    executor = HttpExecutor(url=api.url("/charges/{{input.charge_id}}/ok"))
    data = {} if value is None else {"charge_id": value}

    result = await executor.send(context(**data))

    assert (result.code, result.retry) == (
        "HTTP_REQUEST_INVALID",
        RetryDisposition.AFTER_CORRECTION,
    )
    assert api.seen == []


async def test_query_parameters_take_values_lists_literals_and_skip_absent_fields(
    api: Loopback,
) -> None:
    executor = HttpExecutor(
        url=api.url("/ok"),
        method="GET",
        query={
            "limit": "{{input.limit}}",
            "status": "open",
            "tag": "{{input.tags}}",
            "q": "inv-{{input.id}}",
            "cursor": "{{input.cursor}}",
            "paid": "{{input.paid}}",
        },
    )

    await executor.send(context(limit=5, tags=["a", "b c"], id=7, paid=False))

    _, _, query = api.seen[0].target.partition("?")
    assert parse_qsl(query) == [
        ("limit", "5"),
        ("status", "open"),
        ("tag", "a"),
        ("tag", "b c"),
        ("q", "inv-7"),
        ("paid", "false"),
    ]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_send_no_body(api: Loopback, method: str) -> None:
    await HttpExecutor(url=api.url("/ok"), method=method).send(context(invoice_id="INV-1"))

    (seen,) = api.seen
    assert seen.method == method
    assert seen.body == b""
    assert "Content-Type" not in seen.headers


async def test_a_json_body_template_keeps_types_interpolates_text_and_drops_absent_fields(
    api: Loopback,
) -> None:
    template = {
        "amount": "{{input.amount}}",
        "currency": "eur",
        "metadata": {"reason": "refund for {{ input.invoice_id }}", "note": "{{input.note}}"},
        "lines": ["{{input.invoice_id}}", "{{input.note}}"],
    }
    executor = HttpExecutor(url=api.url("/ok"), body_kind="json", body=template)

    await executor.send(context(invoice_id="INV-1", amount=12.5))

    assert json.loads(api.seen[0].body) == {
        "amount": 12.5,
        "currency": "eur",
        "metadata": {"reason": "refund for INV-1"},
        "lines": ["INV-1"],
    }


async def test_a_form_body_is_url_encoded(api: Loopback) -> None:
    fields = {"amount": "{{input.cents}}", "charge": "{{input.charge}}", "reason": "duplicate"}
    executor = HttpExecutor(url=api.url("/ok"), body_kind="form", body=fields)

    await executor.send(context(cents=1250, charge="ch_1&x=1"))

    (seen,) = api.seen
    assert seen.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qsl(seen.body.decode()) == [
        ("amount", "1250"),
        ("charge", "ch_1&x=1"),
        ("reason", "duplicate"),
    ]


async def test_the_output_mapping_picks_body_fields_headers_and_the_status(api: Loopback) -> None:
    output = {
        "refund_id": "{{body.id}}",
        "state": "{{body.status}}",
        "request": "{{headers.request-id}}",
        "http": "{{status}}",
        "missing": "{{body.nope}}",
    }
    executor = HttpExecutor(url=api.url("/refund"), response=ResponseSpec(output=output))

    result = await executor.send(context())

    assert result.output == {
        "refund_id": "re_1",
        "state": "succeeded",
        "request": "req_9",
        "http": 200,
    }


RULES = (
    CodeRule("CARD_DECLINED", 402, parse_reference("body.error.code"), "card_declined"),
    CodeRule("UPSTREAM_DOWN", "5xx"),
    CodeRule("REFUND_FAILED", 200, parse_reference("body.status"), "failed"),
)


@pytest.mark.parametrize(
    ("route", "reason", "code", "retry", "possibly_applied"),
    [
        ("declined", "declined", "CARD_DECLINED", RetryDisposition.AFTER_CORRECTION, False),
        ("declined", "other", "HTTP_CLIENT_ERROR", RetryDisposition.AFTER_CORRECTION, False),
        ("down", "", "UPSTREAM_DOWN", RetryDisposition.MANUAL_REVIEW, True),
        ("failed", "", "REFUND_FAILED", RetryDisposition.MANUAL_REVIEW, False),
        ("ok", "", Code.SUCCEEDED, RetryDisposition.NEVER, False),
    ],
)
async def test_code_rules_map_statuses_and_response_fields_to_codes(
    api: Loopback,
    route: str,
    reason: str,
    code: str,
    retry: RetryDisposition,
    possibly_applied: bool,
) -> None:
    executor = HttpExecutor(url=api.url(f"/{route}"), response=ResponseSpec(codes=RULES))

    result = await executor.send(context(reason=reason))

    assert (result.code, result.retry, result.possibly_applied) == (code, retry, possibly_applied)


@pytest.mark.parametrize("route", ["big", "big-chunked"])
async def test_a_response_over_the_size_limit_is_not_read(api: Loopback, route: str) -> None:
    small = HttpExecutor(url=api.url(f"/{route}"), response=ResponseSpec(max_bytes=4096))
    large = HttpExecutor(url=api.url(f"/{route}"), response=ResponseSpec(max_bytes=8192))

    refused, read = await small.send(context()), await large.send(context())

    assert (refused.status, refused.code, refused.retry) == (
        ExecutionStatus.FAILED,
        "HTTP_RESPONSE_TOO_LARGE",
        RetryDisposition.MANUAL_REVIEW,
    )
    assert refused.output == {"http_status": 200}
    assert read.status is ExecutionStatus.SUCCEEDED


def _http_block(api: Loopback, lines: str) -> str:
    return f"  executor:\n    http:\n      url: '{api.base}/charges/{{{{input.invoice_id}}}}/refund'\n{lines}"


async def test_a_manifest_refund_runs_governed_with_its_body_mapping_and_result_codes(
    api: Loopback, tmp_path: Path
) -> None:
    block = _http_block(
        api,
        "      body:\n        form: {amount: '{{input.amount}}', reason: '{{input.note}}'}\n"
        "      response:\n        output: {refund_id: '{{body.id}}'}\n"
        "        codes: [{status: 200, field: body.status, equals: pending, code: REFUND_PENDING}]\n"
        "    idempotent: true\n",
    )
    text = edited(PYTHON, block, edited('when: "input.amount > 1000.0"', "when: false"))
    text = edited(
        "    INVOICE_ALREADY_PAID:",
        "    REFUND_PENDING: {status: SUCCEEDED}\n    INVOICE_ALREADY_PAID:",
        text,
    )
    write(tmp_path, "a.yaml", text)
    (action,) = load_manifest_dir(tmp_path, environ={})
    runtime = memory_runtime(action.definition)

    outcome = await runtime.propose(
        proposal({"invoice_id": "INV-9", "amount": 10.0}, action="demo.act")
    )

    assert (outcome.status, outcome.code, outcome.output) == (
        ExecutionStatus.SUCCEEDED,
        Code.SUCCEEDED,
        {"refund_id": "re_1"},
    )
    (seen,) = api.seen
    assert seen.target == "/charges/INV-9/refund"
    assert parse_qsl(seen.body.decode()) == [("amount", "10.0")]
    assert seen.headers["Idempotency-Key"].startswith(outcome.run_id + ":")


@pytest.mark.parametrize(
    ("lines", "needle", "path", "fragment"),
    [
        (
            "      query: {due: '{{input.amont}}'}\n",
            "query:",
            "spec.executor.http.query.due",
            "unknown input reference 'input.amont'; did you mean 'amount'?",
        ),
        (
            "      body:\n        json: {x: ['{{input.note.deep}}', '{{input.nope}}']}\n",
            "json:",
            "spec.executor.http.body.json.x[1]",
            "'input.nope'",
        ),
        (
            "      body: {json: {x: '{{principal.id}}'}}\n",
            "body:",
            "spec.executor.http.body.json.x",
            "templates read the input",
        ),
        (
            "      method: GET\n      body: {json: {}}\n",
            "body:",
            "spec.executor.http.body",
            "GET sends no body",
        ),
        (
            "      headers: {Authorization: 'Bearer {{input.note}}'}\n",
            "Authorization:",
            "spec.executor.http.headers.Authorization",
            "not from the input",
        ),
        (
            "      idempotent: true\n",
            "      idempotent:",
            "spec.executor.http.idempotent",
            "merged into spec.executor.idempotent",
        ),
        (
            "      response: {output: {x: '{{bdy.id}}'}}\n",
            "response:",
            "spec.executor.http.response.output.x",
            "did you mean 'body'?",
        ),
        (
            "      response: {codes: [{status: 400, field: body.x, code: SOMETHING}]}\n",
            "response:",
            "spec.executor.http.response.codes[0]",
            "field and equals go together",
        ),
        (
            "      response: {codes: [{status: 2xx, code: SOMETHING}]}\n",
            "response:",
            "spec.executor.http.response.codes[0].code",
            "declare it in spec.results",
        ),
    ],
)
def test_signoff_check_locates_every_http_template_mistake(
    tmp_path: Path, lines: str, needle: str, path: str, fragment: str
) -> None:
    text = edited(PYTHON, _http_block(Loopback({}, base="http://127.0.0.1:9"), lines))
    write(tmp_path, "a.yaml", text)

    (problem,) = problems(tmp_path, {})

    assert problem.path == path, str(problem)
    assert fragment in problem.message
    assert (problem.file, problem.line) == (str(tmp_path / "a.yaml"), line_of(text, needle))


def test_input_references_outside_the_url_path_are_an_error(tmp_path: Path) -> None:
    block = "  executor:\n    http:\n      url: 'http://{{input.note}}.example/x?id={{input.invoice_id}}'\n"
    write(tmp_path, "a.yaml", edited(PYTHON, block))

    found = problems(tmp_path, {})

    assert [p.path for p in found] == ["spec.executor.http.url"] * 2
    assert all(
        p.code is ProblemCode.INVALID_VALUE and "only in the URL's path" in p.message for p in found
    )


def test_an_invalid_url_error_shows_the_expanded_value_without_its_password(tmp_path: Path) -> None:
    block = "  executor:\n    http:\n      url: '${ERP_URL:-ftp://fallback}/x'\n"
    write(tmp_path, "a.yaml", edited(PYTHON, block))

    (empty,) = problems(tmp_path, {"ERP_URL": ""})
    (secret,) = problems(tmp_path, {"ERP_URL": "ftp://user:hunter2@erp"})

    assert "'ftp://fallback/x'" in empty.message
    assert "'ftp://user:***@erp/x'" in secret.message and "hunter2" not in secret.message


@pytest.mark.parametrize(("data", "sent"), [({"payload": {"a": [1]}}, b'{"a":[1]}'), ({}, b"")])
async def test_a_body_that_is_one_reference_sends_that_value_or_nothing(
    api: Loopback, data: dict[str, Any], sent: bytes
) -> None:
    executor = HttpExecutor(url=api.url("/ok"), body_kind="json", body="{{input.payload}}")

    await executor.send(context(**data))

    assert api.seen[0].body.replace(b" ", b"") == sent
