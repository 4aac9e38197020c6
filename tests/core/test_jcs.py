"""The fast canonical JSON writes exactly ``rfc8785``'s bytes, and refuses what it refuses."""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from signoff.core.jcs import canonical_json

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.sampled_from(["\ue000", "\U0001f600", "\ud800", "\x00\x1f\x7f\u2028", '"\\'])
)
keys = st.text() | st.sampled_from(["a", "\ue000", "\uffff", "\U00010000", "\U0001f600", "é"])
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=20,
)


def reference(value: Any) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(value)
    except Exception as exc:
        return type(exc)


def fast(value: Any) -> bytes | type[Exception]:
    try:
        return canonical_json(value)
    except Exception as exc:
        return type(exc)


@settings(max_examples=3000, deadline=None)
@given(values)
def test_same_bytes_or_same_refusal_as_rfc8785(value: Any) -> None:
    assert fast(value) == reference(value)


class Colour(enum.Enum):
    RED = "red"


class Kind(enum.StrEnum):
    A = "a"


class Level(enum.IntEnum):
    ONE = 1


@pytest.mark.parametrize(
    "value",
    [
        4200.0,
        -0.0,
        1e21,
        1e-7,
        1e16,
        2.0**53,
        2.0**53 - 1,
        9007199254740993,
        -(2**53) + 1,
        0.1,
        1e-5,
        123456789.123,
        math.inf,
        0.0001,
        5e-324,
        1.7976931348623157e308,
        0.30000000000000004,
        123456789012345.67,
        -987.654321,
        [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]] * 2,
        math.nan,
        {"\ue000": 1, "\U0001f600": 2, "a": 3},
        {"b": 1, "a": [1, 2.5, {"z": None, "y": True}]},
        {1: "not a string key"},
        "lone \udc00 surrogate",
        {"\ud800": 1},
        Kind.A,
        Level.ONE,
        Colour.RED,
        {"k": Kind.A, "n": Level.ONE},
        b"bytes",
    ],
)
def test_edge_cases_match_rfc8785(value: Any) -> None:
    assert fast(value) == reference(value)


@settings(max_examples=2000, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=False) | st.floats(min_value=-1e17, max_value=1e17)
)
def test_floats_match_rfc8785(value: float) -> None:
    assert fast({"n": value, "l": [value]}) == reference({"n": value, "l": [value]})


def test_nesting_deeper_than_orjson_goes_matches_rfc8785() -> None:
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    assert fast(deep) == reference(deep)
