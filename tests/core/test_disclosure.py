"""Redaction of operator detail before it is written to the audit trail."""

from __future__ import annotations

import pytest

from signoff.core.disclosure import exception_detail, redact


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
