"""The input limits of contract §9, checked before anything is stored."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import from_json

from signoff.core.input_limits import (
    InputLimits,
    check_input,
    check_name,
    has_bad_text,
    refused_summary,
    safe_text,
)


def nested(depth: int) -> object:
    """``depth`` objects, one inside the other."""
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def test_nesting_up_to_the_depth_limit_passes_and_one_deeper_is_refused() -> None:
    assert check_input(nested(32)) is None
    violation = check_input(nested(33))
    assert violation is not None and violation.reason == "too_deep"


def test_a_request_nested_ten_thousand_deep_is_refused_without_recursion() -> None:
    value: object = "x"
    for _ in range(10_000):
        value = [value]
    violation = check_input({"a": value})
    assert violation is not None and violation.reason == "too_deep"
    assert len(violation.path) <= 200 and len(violation.message) < 200


def test_arguments_over_the_size_limit_are_refused_with_a_message_that_embeds_nothing() -> None:
    big = "A" * (3 * 1024 * 1024)
    violation = check_input({"invoice_id": big})
    assert violation is not None and violation.reason == "too_large"
    assert "AAAA" not in violation.message and len(violation.message) < 200
    assert check_input({"n": "é" * 100_000}) is None
    assert check_input({"n": "é" * 140_000}) is not None  # 280,000 bytes of UTF-8


def test_the_size_limit_is_a_setting() -> None:
    assert check_input({"a": "x" * 100}, InputLimits(max_bytes=50)) is not None
    assert check_input({"a": "x" * 100}, InputLimits(max_bytes=500)) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"a": "x\x00y"}, "bad_string"),
        ({"a": "\ud800"}, "bad_string"),
        ({"a\x00": 1}, "bad_string"),
        ({"a": [1, {"b": "\udfff"}]}, "bad_string"),
        ({"a": math.nan}, "non_finite_number"),
        ({"a": math.inf}, "non_finite_number"),
        ({"a": json.loads("1e400")}, "non_finite_number"),
        ({"a": 2**63}, "integer_out_of_range"),
        ({"a": -(2**63) - 1}, "integer_out_of_range"),
        ({"a": {1, 2}}, "not_json"),
        ({1: "a"}, "not_json"),
    ],
)
def test_hostile_values_are_refused_with_a_stable_reason(value: object, reason: str) -> None:
    violation = check_input(value)
    assert violation is not None
    assert violation.reason == reason
    assert "\x00" not in violation.message and "\ud800" not in violation.message


def test_ordinary_json_passes() -> None:
    value = {"invoice_id": "INV-1", "amount": 10.5, "n": 2**63 - 1, "tags": ["a", None, True]}
    assert check_input(value) is None


def test_safe_text_shows_control_bidi_and_surrogates_and_is_bounded() -> None:
    assert safe_text("a\x00b\u202ec\ud800") == "a\\u0000b\\u202ec\\ud800"
    cut = safe_text("x" * 1000, 10)
    assert cut == "x" * 10 + "…"
    assert safe_text("INV-1").encode("utf-8")


def test_a_tool_name_with_nul_or_a_lone_surrogate_is_refused() -> None:
    assert check_name("tool name", "invoice\x00cancel") is not None
    assert check_name("tool name", "invoice\udc00") is not None
    assert check_name("tool name", "x" * 256) is not None
    assert check_name("tool name", "invoice.cancel") is None


def test_the_refused_summary_is_bounded_and_storable() -> None:
    value = {f"k\x00{i}" * 50: "v" * 10_000 for i in range(100)}
    violation = check_input(value)
    assert violation is not None
    summary = refused_summary(value, violation)
    text = json.dumps(summary, ensure_ascii=False)
    text.encode("utf-8")
    assert "\x00" not in text and len(text) < 4000
    assert summary["key_count"] == 100 and len(summary["keys"]) == 20


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_whatever_passes_the_limits_reads_back_through_the_stores_json_decoder(
    value: object,
) -> None:
    if check_input({"v": value}) is None:
        text = json.dumps({"v": value}, allow_nan=False, ensure_ascii=False)
        assert not has_bad_text(text)
        assert from_json(text.encode("utf-8")) == {"v": value}


def test_a_screened_proposal_is_storable_whatever_it_carried() -> None:
    from signoff.core.input_limits import screen, storable_key

    refused = screen("invoice\x00cancel\ud800", {"a": "b"})
    assert refused is not None and refused.reason == "bad_string"
    stored = json.dumps([refused.action_id, storable_key("key\x00"), refused.input])
    stored.encode("utf-8")
    assert "\x00" not in json.loads(stored)[0] and "\x00" not in json.loads(stored)[1]
    assert storable_key("k-1") == "k-1" and storable_key(None) is None
    assert len(storable_key("x" * 10_000) or "") <= 256
    assert screen("invoice.cancel", {"a": "b"}) is None
    deep = screen("invoice.cancel", {"a": nested(40)})
    assert deep is not None and deep.reason == "too_deep" and deep.input["keys"] == ["a"]
