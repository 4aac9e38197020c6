"""``${VAR}``, ``${VAR:-default}`` and ``${VAR-default}`` in manifests (secrets stay out of YAML).

POSIX shell semantics: ``${VAR:-default}`` uses the default when the variable is unset **or set
but empty**; ``${VAR-default}`` only when it is unset. ``$$`` is a literal ``$``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class Substitution:
    value: str
    missing: tuple[str, ...] = ()
    malformed: bool = False


def substitute(text: str, environ: Mapping[str, str]) -> Substitution:
    """Replace references from ``environ``.

    A variable that is unset (or empty, for ``${VAR}`` with no default) and has no default is
    reported in ``missing`` (a load error); a ``${`` that is not a well-formed reference is
    ``malformed`` rather than silently sent as written.
    """
    missing: list[str] = []

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, operator, default = match.group(1), match.group(2), match.group(3)
        value = environ.get(name)
        if operator == ":-" and not value:
            return default
        if operator == "-" and value is None:
            return default
        if value is None:
            missing.append(name)
            return ""
        return value

    malformed = "${" in _REFERENCE.sub("", text)
    return Substitution(_REFERENCE.sub(replace, text), tuple(missing), malformed)


def redacted_url(url: str) -> str:
    """``url`` as an operator may see it in an error: any password in it replaced by ``***``."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<not a URL>"
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}{port}"
    return urlunsplit(parts._replace(netloc=netloc))
