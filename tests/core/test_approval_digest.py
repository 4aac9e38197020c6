"""The approval digest changes with every part of what is approved, and only with those."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.core.approval_digest import approval_digest, short_digest

BASE: dict[str, Any] = {
    "action_id": "invoice.cancel",
    "definition_revision": "rev-1",
    "input": {"invoice_id": "INV-1", "amount": 5000},
    "resource": "invoice/INV-1",
    "principal_id": "agent-1",
    "principal_roles": ["billing", "agent"],
    "tenant_id": "acme",
}


@pytest.mark.parametrize(
    ("field", "other"),
    [
        ("action_id", "invoice.refund"),
        ("definition_revision", "rev-2"),
        ("input", {"invoice_id": "INV-1", "amount": 5001}),
        ("resource", "invoice/INV-2"),
        ("principal_id", "agent-2"),
        ("principal_roles", ["billing"]),
        ("tenant_id", "other"),
    ],
)
def test_changing_any_approved_part_changes_the_digest(field: str, other: Any) -> None:
    assert approval_digest(**BASE) != approval_digest(**{**BASE, field: other})


def test_equal_inputs_in_another_spelling_have_one_digest() -> None:
    respelled = {**BASE, "input": {"amount": 5000.0, "invoice_id": "INV-1"}}
    reordered_roles = {**BASE, "principal_roles": ["agent", "billing"]}
    assert approval_digest(**BASE) == approval_digest(**respelled)
    assert approval_digest(**BASE) == approval_digest(**reordered_roles)


def test_the_short_form_is_the_first_twelve_hex_digits() -> None:
    digest = approval_digest(**BASE)
    assert len(digest) == 64 and short_digest(digest) == digest[:12]
    assert short_digest(None) == ""
