"""Choices the command line offers, in a module that loads nothing else (``signoff --help``)."""

from __future__ import annotations

from enum import StrEnum


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"
