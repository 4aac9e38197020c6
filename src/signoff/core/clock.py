"""Time and identifiers. Inject a ``ManualClock`` in tests so nothing sleeps."""

from __future__ import annotations

import os
import secrets
import threading
import time
from datetime import UTC, datetime, timedelta


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta


_uuid7_lock = threading.Lock()
_uuid7_last = 0


def new_run_id() -> str:
    """A UUIDv7 (RFC 9562): time-ordered, so ids sort by creation."""
    global _uuid7_last
    with _uuid7_lock:
        ms = time.time_ns() // 1_000_000
        # Keep ids strictly increasing within this process even inside one millisecond.
        if ms <= _uuid7_last >> 12:
            counter = (_uuid7_last & 0xFFF) + 1
            if counter > 0xFFF:
                ms, counter = (_uuid7_last >> 12) + 1, 0
            else:
                ms = _uuid7_last >> 12
        else:
            counter = 0
        _uuid7_last = (ms << 12) | counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_token() -> str:
    """An unguessable token (attempt tokens, approval ids)."""
    return secrets.token_hex(8)
