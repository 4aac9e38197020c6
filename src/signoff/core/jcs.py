"""RFC 8785 (JSON Canonicalization Scheme) bytes, fast where ``orjson`` agrees with ``rfc8785``.

``rfc8785`` is pure Python (~30-50 µs per audit event here); ``orjson`` with sorted keys writes
the same bytes for most JSON values (~1 µs), so a value is handed to it after a check, and to
``rfc8785`` otherwise. ``orjson`` agrees when:

- every object key sorts the same by code point (Python) as by UTF-16 code unit (RFC 8785): true
  unless a key holds a character at or above U+E000, which sends the value to ``rfc8785``;
- strings escape the same: both write UTF-8 with ``\\"``, ``\\\\``, ``\\b \\f \\n \\r \\t``
  and ``\\u00xx`` (lower-case hex) for the other control characters, and nothing else; a lone
  surrogate cannot be encoded as UTF-8 (``orjson`` refuses it), and the value goes to
  ``rfc8785``, which refuses it as before; so does a value nested deeper than ``orjson`` goes;
- numbers print the same: integers within +-(2**53 - 1), an integral float below 2**53 as that
  integer (ECMAScript prints ``4200.0`` as ``4200``), and other finite floats whose ``repr`` has
  no exponent (both print the shortest round-trip digits positionally). Anything else — an
  exponent, NaN, an unsafe integer — goes to ``rfc8785``, which formats or refuses it.

Only the exact types ``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool`` and
``None`` take the fast path; subclasses (enums) go to ``rfc8785``. ``tests/core/test_jcs.py``
compares both on generated values.
"""

from __future__ import annotations

from typing import Any

import orjson
import rfc8785

_SAFE_INT = 2**53 - 1
_EXACT_FLOAT = 2.0**53


class _Slow(Exception):
    """The value needs ``rfc8785``."""


def _ready(value: Any) -> Any:
    """``value`` as ``orjson`` must see it to write RFC 8785 bytes (``value`` itself unless an
    integral float had to become an integer); raises ``_Slow``."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is dict:
        return _ready_object(value)
    if kind is int:
        if -_SAFE_INT <= value <= _SAFE_INT:
            return value
        raise _Slow
    if kind is list or kind is tuple:
        return _ready_array(value)
    if kind is float:
        return _ready_float(value)
    raise _Slow


def _ready_object(value: dict[Any, Any]) -> dict[Any, Any]:
    changed: dict[str, Any] | None = None
    for key, item in value.items():
        if type(key) is not str or (not key.isascii() and max(key) >= "\ue000"):
            raise _Slow
        if type(item) is str or item is None or type(item) is bool:
            continue
        ready = _ready(item)
        if ready is not item:
            if changed is None:
                changed = dict(value)
            changed[key] = ready
    return value if changed is None else changed


def _ready_array(value: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
    items: list[Any] | None = None
    for n, item in enumerate(value):
        ready = _ready(item)
        if ready is not item:
            if items is None:
                items = list(value)
            items[n] = ready
    return value if items is None else items


def _ready_float(value: float) -> float | int:
    if value.is_integer():
        if -_EXACT_FLOAT < value < _EXACT_FLOAT:
            return int(value)
        raise _Slow
    text = repr(value)
    if "e" in text or "n" in text:  # an exponent, inf or nan
        raise _Slow
    return value


def canonical_json(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value; raises ``rfc8785.CanonicalizationError`` as ``rfc8785``."""
    try:
        return orjson.dumps(_ready(value), option=orjson.OPT_SORT_KEYS)
    except (_Slow, orjson.JSONEncodeError, RecursionError):
        return rfc8785.dumps(value)
