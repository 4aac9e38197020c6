"""Every setting signoff reads, by group, from ``catalog.toml`` beside this module (data, kept
complete by ``tests/test_settings_catalog.py``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from signoff.settings.model import Group, Setting

_FIELDS = ("meaning", "default", "example", "computed", "secret", "option", "extra")


def _load() -> tuple[Group, ...]:
    data = tomllib.loads((Path(__file__).parent / "catalog.toml").read_text(encoding="utf-8"))
    return tuple(
        Group(
            group["title"],
            tuple(
                Setting(entry["name"], **{k: entry[k] for k in _FIELDS if k in entry})
                for entry in group["setting"]
            ),
        )
        for group in data["group"]
    )


GROUPS: tuple[Group, ...] = _load()
