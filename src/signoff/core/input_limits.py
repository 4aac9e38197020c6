"""Input limits checked before anything is stored (contract §9).

Every proposal is recorded, and every recorded run must read back, list, export and recover. So
before a run is stored its arguments are walked once (iteratively: a hostile nesting depth cannot
exhaust the stack) and refused when they are

- larger than ``max_bytes`` as compact JSON (default 256 KiB),
- nested deeper than ``max_depth`` (default 32; the arguments object itself is depth 1),
- carrying a string or key with NUL or an unpaired surrogate (PostgreSQL cannot store the first,
  UTF-8 cannot encode the second),
- carrying a non-finite number (NaN, Infinity, ``1e400``) or an integer outside the signed 64-bit
  range policy expressions evaluate (CEL ``int``),
- or holding a value that is not JSON at all (from the Python API).

A refused run stores ``refused_summary``: what was wrong and where, the top-level keys, the size —
bounded and safe to show — never the arguments themselves. The same text rules apply to the names
a caller picks (the action id, the idempotency key): ``safe_text`` renders them storable and
visible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_BYTES = 256 * 1024
DEFAULT_MAX_DEPTH = 32
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_SUMMARY_KEYS = 20
MAX_SUMMARY_KEY_CHARS = 64
MAX_POINTER_CHARS = 200


@dataclass(frozen=True, slots=True)
class InputLimits:
    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.max_depth < 1:
            raise ValueError("input limits must be positive")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> InputLimits:
        """``SIGNOFF_MAX_INPUT_BYTES`` and ``SIGNOFF_MAX_INPUT_DEPTH``, else the defaults."""
        try:
            return cls(
                max_bytes=int(env.get("SIGNOFF_MAX_INPUT_BYTES") or DEFAULT_MAX_BYTES),
                max_depth=int(env.get("SIGNOFF_MAX_INPUT_DEPTH") or DEFAULT_MAX_DEPTH),
            )
        except ValueError as exc:
            raise ValueError(
                "SIGNOFF_MAX_INPUT_BYTES and SIGNOFF_MAX_INPUT_DEPTH must be positive integers"
            ) from exc


DEFAULT_LIMITS = InputLimits()


@dataclass(frozen=True, slots=True)
class LimitViolation:
    """``reason`` is stable (``too_large``, ``too_deep``, ``bad_string``, ``non_finite_number``,
    ``integer_out_of_range``, ``not_json``); ``path`` is a bounded, escaped JSON pointer."""

    reason: str
    path: str
    message: str


def has_bad_text(text: str) -> bool:
    """NUL, or a surrogate code point (in a Python ``str`` from JSON it is always unpaired)."""
    if "\x00" in text:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def safe_text(text: str, limit: int = 200) -> str:
    """``text`` storable and visible: control, bidi and surrogate code points as ``\\uXXXX``
    escapes, cut to ``limit`` characters with a trailing ``…``."""
    out: list[str] = []
    size = 0
    for char in text:
        piece = char if _plain(char) else f"\\u{ord(char):04x}"
        size += len(piece)
        if size > limit:
            out.append("…")
            break
        out.append(piece)
    return "".join(out)


def is_plain_text(text: str) -> bool:
    """No control, bidi, zero-width or surrogate code point (what ``safe_text`` would escape)."""
    return all(_plain(char) for char in text)


def _plain(char: str) -> bool:
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code <= 0xDFFF:
        return False
    # Bidi embeddings/overrides/isolates and marks, zero-width characters, BOM.
    return not (
        0x200B <= code <= 0x200F
        or 0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
        or code in (0x061C, 0xFEFF)
    )


def _pointer(parts: list[str | int]) -> str:
    text = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return safe_text(text, MAX_POINTER_CHARS)


_Frame = tuple[Any, int, list[str | int]]  # (value, depth, path): the path only built for reports


def check_input(value: Any, limits: InputLimits = DEFAULT_LIMITS) -> LimitViolation | None:
    """The first limit ``value`` breaks, or ``None``. Linear in the size, never recursive."""
    used = 0
    stack: list[_Frame] = [(value, 1, [])]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            if depth > limits.max_depth:
                return _deep(path, limits)
            size, problem = _container(item, depth, path, stack)
        else:
            size, problem = _scalar(item, path)
        if problem is not None:
            return problem
        used += size
        if used > limits.max_bytes:
            return LimitViolation(
                "too_large",
                "",
                f"The arguments are larger than the limit of {limits.max_bytes} bytes.",
            )
    return None


def _container(
    item: Any, depth: int, path: list[str | int], stack: list[_Frame]
) -> tuple[int, LimitViolation | None]:
    """An object's or array's own bytes; its children go on ``stack``."""
    size = 2 + max(len(item) - 1, 0)
    if not isinstance(item, Mapping):
        stack.extend((child, depth + 1, [*path, i]) for i, child in enumerate(item))
        return size, None
    for key, child in item.items():
        if not isinstance(key, str):
            return size, LimitViolation(
                "not_json", _pointer(path), f"{_at(path)}an object key that is not text."
            )
        if has_bad_text(key):
            return size, _bad_string([*path, key])
        size += len(key) + 3
        stack.append((child, depth + 1, [*path, key]))
    return size, None


def _scalar(item: Any, path: list[str | int]) -> tuple[int, LimitViolation | None]:
    """A scalar's bytes (an upper bound), or what makes it unacceptable."""
    if isinstance(item, str):
        if has_bad_text(item):
            return 0, _bad_string(path)
        # UTF-8 length is at most 4 per code point; count exactly only near the budget.
        return 2 + (len(item) if item.isascii() else len(item.encode("utf-8"))), None
    if isinstance(item, bool) or item is None:
        return 5, None
    if isinstance(item, int):
        if not INT64_MIN <= item <= INT64_MAX:
            return 0, LimitViolation(
                "integer_out_of_range",
                _pointer(path),
                f"{_at(path)}an integer outside the 64-bit range policies evaluate.",
            )
        return 20, None
    if isinstance(item, float):
        if not math.isfinite(item):
            return 0, LimitViolation(
                "non_finite_number",
                _pointer(path),
                f"{_at(path)}a number that is not finite (NaN, Infinity or out of range).",
            )
        return 24, None
    return 0, LimitViolation("not_json", _pointer(path), f"{_at(path)}a value that is not JSON.")


def _at(path: list[str | int]) -> str:
    return f"{_pointer(path)} holds " if path else "The arguments hold "


def _deep(path: list[str | int], limits: InputLimits) -> LimitViolation:
    # Report the pointer only down to the limit: a 10,000-deep path is not a message.
    return LimitViolation(
        "too_deep",
        _pointer(path[: limits.max_depth]),
        f"The arguments are nested deeper than the limit of {limits.max_depth} levels.",
    )


def _bad_string(path: list[str | int]) -> LimitViolation:
    return LimitViolation(
        "bad_string",
        _pointer(path),
        f"{_at(path)}text with a NUL character or an unpaired surrogate.",
    )


def refused_summary(value: Any, violation: LimitViolation) -> dict[str, Any]:
    """What a refused run stores instead of its arguments: bounded, storable, safe to show."""
    summary: dict[str, Any] = {
        "refused": violation.reason,
        "at": violation.path,
        "type": _json_type(value),
    }
    if isinstance(value, Mapping):
        keys = [safe_text(str(k), MAX_SUMMARY_KEY_CHARS) for k in list(value)[:MAX_SUMMARY_KEYS]]
        summary["keys"] = keys
        summary["key_count"] = len(value)
    return summary


def _json_type(value: Any) -> str:
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "null" if value is None else "other"


def check_name(what: str, text: str, max_chars: int = 255) -> LimitViolation | None:
    """A caller-chosen name (tool/action id, idempotency key): storable and bounded."""
    if has_bad_text(text):
        return LimitViolation(
            "bad_string", "", f"The {what} holds a NUL character or an unpaired surrogate."
        )
    if len(text) > max_chars:
        return LimitViolation("too_large", "", f"The {what} is longer than {max_chars} characters.")
    return None


@dataclass(frozen=True, slots=True)
class Refused:
    """A proposal refused by the limits, in the form the run can store: the tool name storable,
    the arguments replaced by their ``refused_summary``."""

    action_id: str
    input: dict[str, Any]
    reason: str
    message: str


def screen(action_id: str, arguments: Any, limits: InputLimits = DEFAULT_LIMITS) -> Refused | None:
    """Check a proposal before anything is stored; ``None`` when it is within the limits."""
    violation = check_name("tool name", action_id) or check_input(arguments, limits)
    if violation is None:
        return None
    return Refused(
        action_id=safe_text(action_id, 255) if has_bad_text(action_id) else action_id[:255],
        input=refused_summary(arguments, violation),
        reason=violation.reason,
        message=violation.message,
    )


def storable_key(key: str | None) -> str | None:
    """An ``idempotency_key`` as a run may record it: a malformed key is refused anyway
    (``IDEMPOTENCY_KEY_INVALID``), so it is kept escaped and bounded rather than verbatim."""
    if key is None or (key.isascii() and key.isprintable() and 0 < len(key) <= 255):
        return key
    return safe_text(key, 255)
