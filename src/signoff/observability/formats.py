"""The log formats an operator picks (``--log-format``); a module of its own so the command line
can offer the choice without loading the logging machinery."""

from __future__ import annotations

from enum import StrEnum


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
