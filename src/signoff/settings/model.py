"""A setting and a group of settings: what the catalog (``catalog.py``) is made of."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    meaning: str
    default: str | None = None  # the value that applies when unset; None: nothing (feature off)
    example: str | None = None  # a value to show when there is no default
    computed: bool = False  # ``default`` describes a value worked out at start, not a literal
    secret: bool = False
    option: str | None = None  # the command-line option that wins over the variable
    extra: str | None = None  # the package extra the feature needs


@dataclass(frozen=True, slots=True)
class Group:
    title: str
    settings: tuple[Setting, ...]
