"""The catalog as people read it: the commented env file ``signoff init`` writes, and the tables
of the settings reference (``docs/settings.md``)."""

from __future__ import annotations

import textwrap

from signoff.settings.catalog import GROUPS
from signoff.settings.model import Setting


def env_file() -> str:
    """Every setting as a commented-out ``NAME=value`` line under its meaning, by group."""
    lines = [
        "# signoff settings. Every one is listed, commented out, with its default (or an",
        "# example where it has none). Uncomment what you change. Load it with",
        "#   set -a; . ./signoff.env; set +a",
        "# or systemd's EnvironmentFile=. Keep secrets out of version control.",
    ]
    for group in GROUPS:
        lines += ["", f"## {group.title}"]
        for setting in group.settings:
            lines += _describe(setting)
    return "\n".join(lines) + "\n"


def _describe(setting: Setting) -> list[str]:
    notes = []
    if setting.default is not None and setting.computed:
        notes.append(f"Default: {setting.default}.")
    if setting.option:
        notes.append(f"The option {setting.option} wins.")
    if setting.extra:
        notes.append(f"Needs the {setting.extra} extra.")
    if setting.secret:
        notes.append("A secret: make one with openssl rand -base64 48.")
    meaning = f"{setting.meaning}. {' '.join(notes)}".strip()
    wrapped = textwrap.wrap(meaning, 94, break_on_hyphens=False, break_long_words=False)
    if setting.secret or setting.computed:
        value = ""
    elif setting.default is not None:
        value = setting.default
    else:
        value = setting.example or ""
    return [*(f"# {line}" for line in wrapped), f"# {setting.name}={_quoted(value)}"]


def _quoted(value: str) -> str:
    if all(c.isalnum() or c in "-_.:/+@,=" for c in value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"


def markdown_table() -> str:
    """The settings reference (``docs/settings.md`` between its markers): one table per group."""
    out: list[str] = []
    for group in GROUPS:
        out += [f"### {group.title}", "", "| variable | default | meaning |", "|---|---|---|"]
        for setting in group.settings:
            if setting.default is None:
                default = "—"
            elif setting.computed:
                default = setting.default
            else:
                default = f"`{setting.default}`"
            notes = [setting.meaning]
            if setting.option:
                notes.append(f"option `{setting.option}`")
            if setting.extra:
                notes.append(f"extra `{setting.extra}`")
            if setting.secret:
                notes.append("secret")
            if setting.default is None and setting.example:
                notes.append(f"e.g. `{setting.example}`")
            meaning = "; ".join(notes).replace("|", "\\|")
            out.append(f"| `{setting.name}` | {default} | {meaning} |")
        out.append("")
    return "\n".join(out)
