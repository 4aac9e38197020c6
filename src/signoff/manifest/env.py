"""``${VAR}`` and ``${VAR:-default}`` in HTTP executor URLs and headers (secrets stay out of YAML)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class Substitution:
    value: str
    missing: tuple[str, ...] = ()
    malformed: bool = False


def substitute(text: str, environ: Mapping[str, str]) -> Substitution:
    """Replace references from ``environ``; ``$$`` is a literal ``$``.

    A variable that is unset and has no default is reported in ``missing`` (a load error); a ``${``
    that is not a well-formed reference is ``malformed`` rather than silently sent as written.
    """
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value is not None:
            return value
        if default is not None:
            return default
        missing.append(name)
        return ""

    malformed = "${" in _REFERENCE.sub("", text)
    return Substitution(_REFERENCE.sub(replace, text), tuple(missing), malformed)
