"""Durations as manifests write them: ``90s``, ``30m``, ``24h``, ``7d``, ``1h30m``, ``250ms``."""

from __future__ import annotations

import re
from datetime import timedelta

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``24h``, ``7d``, ``1h30m``, ``250ms`` (the model checked the syntax)."""
    seconds = sum(
        int(amount) * _UNITS[unit] for amount, unit in re.findall(r"([0-9]+)(ms|s|m|h|d)", text)
    )
    return timedelta(seconds=seconds)
