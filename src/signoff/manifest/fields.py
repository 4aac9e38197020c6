"""Resolving a field path (``customer.name``, ``items[0].sku``) against a JSON Schema.

The one place that knows which fields a schema declares: CEL references (``cel_fields``), HTTP
executor templates (``http_checks``) and the names in ``display``, ``amend`` and ``sensitive`` all
ask ``resolve``. It answers

- ``Found``: the path is declared; ``schema`` is the schema of its value (``None``: nothing more
  can be known below it, e.g. a dynamic index or an array without ``items``);
- ``Missing``: step ``depth`` names a field the object does not declare. ``open`` says why such a
  field may still be there (``additionalProperties`` is not false, a ``patternProperties`` or a
  ``$ref`` that cannot be followed...); ``None`` means the schema forbids it;
- ``NotObject``: step ``depth`` reads a field of a value that is not an object (a number...).

Combinators are read generously: a field declared in any branch of ``allOf``/``anyOf``/``oneOf``,
``then``/``else``, ``dependentSchemas`` or a local ``$ref`` (``#/$defs/...``) is declared. An
undeclared field is forbidden when ``additionalProperties`` or ``unevaluatedProperties`` is
false on the object or on one of its ``allOf`` branches, or on every ``anyOf``/``oneOf`` branch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

_DEPTH: Final = 32
_KINDS: Final = {
    "string": "a string", "number": "a number", "integer": "an integer",
    "boolean": "a boolean", "array": "an array", "null": "null", "object": "an object",
    "timestamp": "a timestamp",
}  # fmt: skip


class _Element:
    def __repr__(self) -> str:
        return "ELEMENT"


ELEMENT: Final = _Element()
"""A path step meaning "any element" (a comprehension variable, ``items[i]`` with ``i`` unknown)."""

Step = str | int | _Element | None
"""A field name, an index, ``ELEMENT``, or ``None`` for a key not known statically."""


@dataclass(frozen=True, slots=True)
class Found:
    schema: Any


@dataclass(frozen=True, slots=True)
class Missing:
    depth: int
    name: str
    declared: tuple[str, ...]
    open: str | None


@dataclass(frozen=True, slots=True)
class NotObject:
    depth: int
    kind: str


Resolution = Found | Missing | NotObject


@dataclass
class _Lookup:
    """What a schema says about one field name."""

    schemas: list[Any] = field(default_factory=list)
    declared: set[str] = field(default_factory=set)
    open: str | None = None  # why another name may be there; None: forbidden


def _types(schema: dict[str, Any]) -> list[str] | None:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return None


def kind_of(types: list[str]) -> str:
    """``["number"]`` -> ``a number``; several types are joined with ``or``, in their order."""
    return " or ".join(_KINDS.get(kind, kind) for kind in types)


class SchemaFields:
    """Resolves paths against ``root`` (whose local ``$ref`` pointers it follows)."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def resolve(self, path: Sequence[Step]) -> Resolution:
        node: Any = self.root
        for depth, step in enumerate(path):
            if node is None:
                return Found(None)
            if isinstance(step, str):
                found = self._field_step(node, step, depth)
                if not isinstance(found, Found):
                    return found
                node = found.schema
            else:  # an index, any element, or a key not known statically (an index if an array)
                node = self._element(node, ELEMENT if step is None else step, 0)
        return Found(node)

    def _deref(self, schema: Any) -> Any:
        """The schema a local ``$ref`` points at, ``None`` when it cannot be followed."""
        reference = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(reference, str) or not reference.startswith("#"):
            return None
        node: Any = self.root
        for token in reference[1:].split("/")[1:] if reference != "#" else ():
            token = token.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return None
        return node

    def _field_step(self, node: Any, name: str, depth: int) -> Resolution:
        if isinstance(node, dict):
            types = _types(node)
            if types is not None and "object" not in types:
                if "array" in types and name.isdigit():  # a template's ``items.0``
                    return Found(self._element(node, int(name), 0))
                return NotObject(depth, kind_of(types))
        found = self._lookup(node, name, 0)
        if found.schemas:
            schemas = found.schemas
            return Found(schemas[0] if len(schemas) == 1 else {"anyOf": schemas})
        return Missing(depth, name, tuple(sorted(found.declared)), found.open)

    def _lookup(self, node: Any, name: str, level: int) -> _Lookup:
        if node is False:
            return _Lookup()  # nothing is valid, no field either
        if not isinstance(node, dict):
            return _Lookup(open="it is not a schema" if node is not True else _why_open({}))
        if level > _DEPTH:
            return _Lookup(open="its $ref nesting is too deep to follow")
        result = _Lookup()
        types = _types(node)
        if types is not None and "object" not in types:
            return result  # no field can be there
        unread = self._own_fields(node, name, result)
        closed = node.get("additionalProperties") is False
        closed = closed or node.get("unevaluatedProperties") is False
        conjuncts = [*_list(node.get("allOf"))]
        if "$ref" in node:
            target = self._deref(node)
            if target is None:
                unread = unread or f"its $ref {node['$ref']!r} is not followed here"
            else:
                conjuncts.append(target)
        for conjunct in conjuncts:
            found = self._merge(result, conjunct, name, level)
            closed = closed or found.open is None
        for keyword in ("anyOf", "oneOf"):
            branches = [self._merge(result, b, name, level) for b in _list(node.get(keyword))]
            closed = closed or (bool(branches) and all(b.open is None for b in branches))
        for optional in _conditional(node):
            self._merge(result, optional, name, level)
        if not closed:
            result.open = unread or _why_open(node, bool(result.declared))
        return result

    @staticmethod
    def _own_fields(node: dict[str, Any], name: str, result: _Lookup) -> str | None:
        """``node``'s own ``properties`` and ``patternProperties`` for ``name``, into ``result``;
        returns why a part that may admit ``name`` could not be read (``None``: all read)."""
        properties = node.get("properties")
        if isinstance(properties, dict):
            result.declared.update(str(p) for p in properties)
            if name in properties:
                result.schemas.append(properties[name])
        unread = None
        patterns = node.get("patternProperties")
        for pattern, schema in patterns.items() if isinstance(patterns, dict) else ():
            try:
                matched = re.search(str(pattern), name) is not None
            except re.error:
                unread = f"its patternProperties {pattern!r} cannot be read here"
                continue
            if matched:
                result.schemas.append(schema)
        return unread

    def _merge(self, into: _Lookup, branch: Any, name: str, level: int) -> _Lookup:
        found = self._lookup(branch, name, level + 1)
        into.schemas += found.schemas
        into.declared |= found.declared
        return found

    def _element(self, node: Any, index: int | _Element, level: int) -> Any:
        """The schema of an element of the array ``node`` (``None``: not known)."""
        if not isinstance(node, dict) or level > _DEPTH:
            return None
        if "$ref" in node:
            return self._element(self._deref(node), index, level + 1)
        prefix = node.get("prefixItems")
        if isinstance(index, int) and isinstance(prefix, list) and index < len(prefix):
            return prefix[index]
        items = node.get("items")
        if isinstance(items, dict):
            return items
        branches = [
            found
            for keyword in ("allOf", "anyOf", "oneOf")
            for branch in _list(node.get(keyword))
            if (found := self._element(branch, index, level + 1)) is not None
        ]
        if not branches:
            return None
        return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _conditional(node: dict[str, Any]) -> list[Any]:
    """Branches that may declare more fields but never forbid any."""
    found = [node[keyword] for keyword in ("then", "else") if keyword in node]
    dependent = node.get("dependentSchemas")
    return found + (list(dependent.values()) if isinstance(dependent, dict) else [])


def _why_open(node: dict[str, Any], declares: bool = False) -> str:
    additional = node.get("additionalProperties")
    if additional is None:
        if not declares:
            return "it declares no fields (and no additionalProperties: false)"
        return "its additionalProperties is not false"
    if additional is True:
        return "its additionalProperties is true"
    return "its additionalProperties is a schema"


def resolve(schema: Any, path: Sequence[Step]) -> Resolution:
    """``path`` resolved against ``schema`` (see the module docstring)."""
    return SchemaFields(schema).resolve(path)


def step_text(path: Sequence[Step]) -> str:
    """``("customer", "name")`` -> ``.customer.name``; indexes as ``[0]``, ``[*]``, ``[?]``."""
    out = ""
    for step in path:
        if isinstance(step, str):
            out += f".{step}" if re.fullmatch(r"[A-Za-z_]\w*", step) else f"[{step!r}]"
        elif isinstance(step, int):
            out += f"[{step}]"
        else:
            out += "[*]" if step is ELEMENT else "[?]"
    return out
