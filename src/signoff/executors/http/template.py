"""References in HTTP executor templates: ``{{ input.invoice_id }}``, ``{{ body.refund.id }}``.

A string that is exactly one reference takes the referenced value with its JSON type; a reference
inside a longer string is interpolated as text. A value that is absent (an optional input field the
caller did not send, a response field that is not there) drops the enclosing object member, list
item or query parameter; inside text it is a ``TemplateError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

REFERENCE: Final = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
_EXACT: Final = re.compile(rf"^\s*{REFERENCE.pattern}\s*$")


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


class TemplateError(ValueError):
    """A value cannot be rendered where the template puts it (the message names the reference)."""


@dataclass(frozen=True, slots=True)
class Reference:
    root: str
    path: tuple[str, ...]

    @property
    def text(self) -> str:
        return ".".join((self.root, *self.path))

    def lookup(self, scope: Mapping[str, Any]) -> Any:
        """The referenced value, or ``ABSENT``. Mappings are looked up with ``.get`` (so
        case-insensitive header mappings stay case-insensitive); lists by a numeric segment."""
        value: Any = scope.get(self.root, ABSENT)
        for part in self.path:
            if isinstance(value, Mapping):
                value = value.get(part, ABSENT)
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return ABSENT
        return value


def _reference(match: re.Match[str]) -> Reference:
    path = match.group(2)
    return Reference(match.group(1), tuple(path[1:].split(".")) if path else ())


def parse_reference(text: str) -> Reference | None:
    """``"body.error.code"`` (no braces) -> a reference, or ``None`` if it is not one."""
    match = _EXACT.match(f"{{{{{text}}}}}")
    return _reference(match) if match else None


def references(template: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, Reference]]:
    """Every reference in a template value, with the field path (within the template) of its string."""
    if isinstance(template, str):
        for match in REFERENCE.finditer(template):
            yield path, _reference(match)
    elif isinstance(template, dict):
        for key, value in template.items():
            yield from references(value, (*path, key))
    elif isinstance(template, list):
        for index, value in enumerate(template):
            yield from references(value, (*path, index))


def as_text(value: Any, where: str) -> str:
    """A scalar as it appears in a URL, query or form: strings as they are, JSON otherwise."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):  # bool too: true, false
        return json.dumps(value)
    if value is None or value is ABSENT:
        raise TemplateError(f"{where} has no value")
    raise TemplateError(f"{where} is not a string, number or boolean")


def render_text(text: str, scope: Mapping[str, Any]) -> Any:
    """A template string: the typed value of an exact reference, else text (or ``TemplateError``)."""
    exact = _EXACT.match(text)
    if exact:
        return _reference(exact).lookup(scope)

    def replace(match: re.Match[str]) -> str:
        reference = _reference(match)
        return as_text(reference.lookup(scope), reference.text)

    return REFERENCE.sub(replace, text)


def render(template: Any, scope: Mapping[str, Any]) -> Any:
    """A JSON template with references resolved; absent values drop their member or item."""
    if isinstance(template, str):
        return render_text(template, scope)
    if isinstance(template, dict):
        rendered = {key: render(value, scope) for key, value in template.items()}
        return {key: value for key, value in rendered.items() if value is not ABSENT}
    if isinstance(template, list):
        items = [render(value, scope) for value in template]
        return [item for item in items if item is not ABSENT]
    return template
