"""Schema validation: ECMA-262 patterns, bounded messages, and the sensitive mask in messages."""

from __future__ import annotations

import json
from typing import Any

import pytest

from signoff import Code
from tests.helpers import NO_APPROVAL, Recorder, definition, memory_runtime, proposal

CARD = "4111 1111 1111 1111"
CARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_id": {"type": "string", "pattern": "^INV-[0-9]+$", "maxLength": 100},
        "amount": {"type": "number"},
        "card": {"type": "string", "pattern": "^[0-9]{16}$"},
    },
    "required": ["invoice_id", "amount"],
    "additionalProperties": False,
}


def _runtime(sensitive: str = "card") -> Any:
    return memory_runtime(
        definition(
            Recorder(),
            input_schema=CARD_SCHEMA,
            sensitive_fields=(sensitive,),
            approval=NO_APPROVAL,
        )
    )


async def test_a_pattern_anchor_does_not_match_before_a_trailing_newline() -> None:
    runtime = _runtime()
    refused = await runtime.propose(proposal({"invoice_id": "INV-1002\n", "amount": 1}))
    assert refused.code == Code.INPUT_VALIDATION_FAILED
    accepted = await runtime.propose(proposal({"invoice_id": "INV-1002", "amount": 1}, key="k2"))
    assert accepted.code == Code.SUCCEEDED


@pytest.mark.parametrize("sensitive", ["card", "/input/card"])
async def test_a_validation_message_never_shows_a_sensitive_value(sensitive: str) -> None:
    runtime = _runtime(sensitive)
    refused = await runtime.propose(proposal({"invoice_id": "INV-1", "amount": 1, "card": CARD}))
    assert refused.code == Code.INPUT_VALIDATION_FAILED
    stored = await runtime.get(refused.run_id, "acme")
    for answer in (refused, stored):
        text = json.dumps(answer.model_dump(mode="json"))
        assert "4111" not in text
        assert "/card" in text and "sensitive" in text


async def test_a_huge_value_is_not_embedded_in_the_message() -> None:
    runtime = _runtime()
    refused = await runtime.propose(proposal({"invoice_id": "I" * 200_000, "amount": 1}))
    assert refused.code == Code.INPUT_VALIDATION_FAILED
    assert len(refused.message) < 400
    assert len(json.dumps(refused.model_dump(mode="json"))) < 4000


async def test_control_characters_in_a_message_are_shown_as_escapes() -> None:
    runtime = _runtime()
    refused = await runtime.propose(proposal({"invoice_id": "INV-\u202e1", "amount": 1}))
    assert refused.code == Code.INPUT_VALIDATION_FAILED
    assert "\u202e" not in refused.message and "\\u202e" in refused.message
