"""Redaction of operator detail before it is written to the audit trail, and which messages an
agent may read as they are."""

from __future__ import annotations

import pytest

from signoff.core.codes import CODE_DESCRIPTIONS, Code
from signoff.core.disclosure import exception_detail, plain, redact, screened
from signoff.core.results import ExecutionResult


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("connect to postgresql://erp_user:S3cr3t@db:5432/erp", "S3cr3t", "postgresql://***@db"),
        ("http://svc:hunter2@h/x?api_key=hunter2&page=2", "hunter2", "page=2"),
        ("GET https://h/x?token=abc123def&ok=1", "abc123def", "ok=1"),
        ("host=db user=erp password=pa55word dbname=erp", "pa55word", "dbname=erp"),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
            "eyJhbGciOiJIUzI1NiJ9",
            "Authorization",
        ),
        ("client_secret: sh-hidden, next", "sh-hidden", "next"),
    ],
)
def test_credentials_in_urls_parameters_and_headers_are_redacted(
    text: str, secret: str, kept: str
) -> None:
    redacted = redact(text)
    assert secret not in redacted
    assert kept in redacted
    assert "***" in redacted


def test_detail_is_bounded() -> None:
    assert len(redact("x" * 10_000)) <= 2001


def test_an_exception_detail_keeps_its_type_and_loses_its_credentials() -> None:
    detail = exception_detail(RuntimeError("mysql://root:toor@127.0.0.1/app refused"))
    assert detail.startswith("RuntimeError: mysql://***@127.0.0.1/app")
    assert "toor" not in detail


@pytest.mark.parametrize(
    "message",
    [
        "No such invoice.",
        "INV-1002 is for 4200.00 EUR, not the amount given; issue a credit note instead.",
        "Amount must be between 1 and 10/20 of the limit (see the policy).",
        "Error: the customer is blocked.",
        "",
    ],
)
def test_a_plain_sentence_reaches_the_agent_as_it_is(message: str) -> None:
    assert plain(message)


@pytest.mark.parametrize(
    "message",
    [
        "connect to postgresql://erp:pw@db/erp failed",
        "see https://erp.example/status",
        "failed in /srv/erp/client.py",
        r"failed in C:\erp\client.py",
        'Traceback (most recent call last): File "x.py"',
        "RuntimeError: boom",
        "psycopg.OperationalError: connection refused",
        "[SQL: SELECT 1]",
        "SELECT id FROM invoices WHERE id = 1",
        "first line\nsecond line",
        "host=db password=pa55word",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload",
        "x" * 501,
    ],
)
def test_a_message_carrying_internals_is_not_plain(message: str) -> None:
    assert not plain(message)


def test_a_result_message_that_is_not_plain_becomes_the_codes_catalog_message() -> None:
    leaky = ExecutionResult.failure(Code.ACTION_TIMED_OUT, "timeout talking to mysql://u:pw@db/x")
    shown = screened(None, leaky)
    assert shown.message == CODE_DESCRIPTIONS[Code.ACTION_TIMED_OUT]
    assert shown.detail is not None and "mysql://***@db/x" in shown.detail
    assert "pw" not in shown.detail
    # A domain code gets the status's sentence; a plain message stays.
    assert "mysql" not in screened(None, leaky.model_copy(update={"code": "ERP_DOWN"})).message
    assert screened(None, ExecutionResult.failure("ERP_DOWN", "ERP is down.")).message == (
        "ERP is down."
    )
