"""Writing manifests into a temporary directory and finding their problems."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff.manifest import ManifestErrors, ManifestProblem, load_manifests

VALID = """\
apiVersion: signoff/v1
kind: Action
metadata:
  id: demo.act
  title: Demo
spec:
  effect: write
  risk: high
  input:
    type: object
    properties:
      invoice_id: {type: string}
      amount: {type: number}
      note: {type: string}
    required: [invoice_id, amount]
    additionalProperties: false
  resource: "'invoice/' + input.invoice_id"
  idempotency: {key: required, scope: resource}
  policy:
    roles: [billing]
    deny:
      - when: "input.amount > 100000.0"
        code: AMOUNT_OVER_LIMIT
      - when: "input.amount < 0.0"
        code: NEGATIVE_AMOUNT
  approval:
    when: "input.amount > 1000.0"
    approvers: {roles: [billing-lead], count: 2}
    expires_after: 1h30m
  guard: tests.manifest.hooks:allow
  executor:
    python: tests.manifest.hooks:echo
    timeout: 5s
    idempotent: true
  results:
    INVOICE_ALREADY_PAID: {status: FAILED, retry: NEVER}
  sensitive: [note]
tests:
  - name: small amounts run directly
    principal: {roles: [billing]}
    input: {invoice_id: INV-1, amount: 10.0}
    expect: SUCCEEDED
"""


def edited(old: str, new: str, text: str = VALID) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line containing ``needle``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


def column_of(text: str, needle: str) -> int:
    """The 1-based column where ``needle`` starts on its line."""
    line = text.splitlines()[line_of(text, needle) - 1]
    return line.index(needle) + 1


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(directory: Path, environ: dict[str, str] | None = None) -> list[ManifestProblem]:
    with pytest.raises(ManifestErrors) as caught:
        load_manifests(directory, environ=environ or {})
    return caught.value.problems


def only_problem(directory: Path, environ: dict[str, str] | None = None) -> ManifestProblem:
    found = problems(directory, environ)
    assert len(found) == 1, [str(p) for p in found]
    return found[0]
