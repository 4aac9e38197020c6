"""Every field a CEL expression reads, resolved against the schema of its variable.

``input.prio`` against a ``spec.input`` that declares ``priority`` (with ``additionalProperties:
false``) can never be there: a condition reading it fails closed on every call, and ``has()`` of
it is always false (an approval rule that never fires). Such a reference is an error, located at
the field inside the expression, with a did-you-mean; where the schema admits undeclared fields
the reference cannot be checked, and a warning says so.

References are found by ``cel_syntax``: ``input.a.b``, ``input["a"]``, ``input.items[0].sku``,
``has(input.a)``, and the variables of comprehension macros, resolved as the elements of their
range (``input.items.all(i, i.sku != '')`` reads ``input.items[*].sku``). A macro variable shadows
a root variable of the same name. Other variables (``principal``, ``proposer``, ``action``...) are
resolved against the shapes ``core.policy`` declares for them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from signoff.core.policy import CEL_VARIABLE_SCHEMAS, CEL_VARIABLES
from signoff.manifest.cel_syntax import (
    Call,
    Ident,
    Index,
    Literal,
    Node,
    Select,
    Unsupported,
    parse,
)
from signoff.manifest.errors import ManifestProblem, ProblemCode, Severity
from signoff.manifest.fields import (
    ELEMENT,
    Found,
    NotObject,
    Resolution,
    SchemaFields,
    Step,
    step_text,
)
from signoff.manifest.positions import offset_position
from signoff.manifest.shape import suggest
from signoff.manifest.source import Document, FieldPath

# Macros whose first argument is a variable bound to each element of the range (the target).
_ELEMENT_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# Extensions binding one or two variables the checker does not follow (``transformList``...).
_BINDERS = _ELEMENT_MACROS | {"transformList", "transformMap", "transformMapEntry"}

Binding = tuple[str, tuple[Step, ...]] | None
"""What a macro variable stands for: a root variable and the path from it, or not known."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A field path an expression reads, from the root variable it is resolved against."""

    root: str
    path: tuple[Step, ...]
    spans: tuple[tuple[int, int] | None, ...]
    """For each step, where it is written (``None``: a step of a macro variable's range)."""
    written: str
    """The name the reference starts with as written: the root, or a macro variable."""
    in_has: bool = False

    @property
    def first(self) -> int:
        """The first step written in this reference (the steps before are its variable's)."""
        return next((i for i, span in enumerate(self.spans) if span is not None), len(self.path))

    def text(self, depth: int) -> str:
        """The reference up to and including step ``depth``, as written (``x.sku``)."""
        return self.written + step_text(self.path[self.first : depth + 1])


def _chain(node: Node) -> tuple[Ident, list[Select | Index]] | None:
    """``a.b[c].d`` -> (``a``, [``.b``, ``[c]``, ``.d``]); ``None`` unless it starts at a name."""
    links: list[Select | Index] = []
    while isinstance(node, Select | Index):
        links.append(node)
        assert node.operand is not None
        node = node.operand
    return (node, links[::-1]) if isinstance(node, Ident) else None


def _step(link: Select | Index) -> Step:
    if isinstance(link, Select):
        return link.name
    key = link.key
    if isinstance(key, Literal) and key.kind == "string":
        return str(key.value)
    if isinstance(key, Literal) and key.kind in ("int", "uint"):
        return int(key.value)
    return None


class _Walk:
    def __init__(self) -> None:
        self.found: list[Reference] = []

    def binding(self, name: str, scope: Mapping[str, Binding]) -> Binding:
        if name in scope:
            return scope[name]
        return (name, ()) if name in CEL_VARIABLES else None

    def range_of(self, node: Node, scope: Mapping[str, Binding]) -> Binding:
        """The path a macro iterates over (``filter`` keeps its range's elements)."""
        if isinstance(node, Call) and node.name == "filter" and node.target is not None:
            return self.range_of(node.target, scope)
        chain = _chain(node)
        if chain is None:
            return None
        ident, links = chain
        bound = self.binding(ident.name, scope)
        if bound is None:
            return None
        return bound[0], (*bound[1], *map(_step, links))

    def visit(self, node: Node, scope: Mapping[str, Binding], *, in_has: bool = False) -> None:
        chain = _chain(node) if isinstance(node, Select | Index | Ident) else None
        if chain is not None:
            ident, links = chain
            bound = self.binding(ident.name, scope)
            if bound is not None:
                root, prefix = bound
                spans = (*([None] * len(prefix)), *((link.start, link.end) for link in links))
                path = (*prefix, *map(_step, links))
                self.found.append(Reference(root, path, spans, ident.name, in_has))
            for link in links:
                if isinstance(link, Index) and link.key is not None:
                    self.visit(link.key, scope)
            return
        if isinstance(node, Call) and self.macro(node, scope):
            return
        for child in node.children:
            self.visit(child, scope)

    def macro(self, call: Call, scope: Mapping[str, Binding]) -> bool:
        """Visit a macro (``has``, comprehensions); ``False`` when ``call`` is not one."""
        args = call.args
        if call.target is None:
            if call.name == "has" and len(args) == 1:
                self.visit(args[0], scope, in_has=True)
                return True
            return False
        names = [arg.name for arg in args[:2] if isinstance(arg, Ident) and "." not in arg.name]
        if call.name not in _BINDERS or not names or len(args) < 2:
            return False
        self.visit(call.target, scope)
        two = len(args) >= 3 and len(names) == 2 and call.name != "map"
        bound = names[:2] if two else names[:1]
        inner = dict(scope)
        if call.name in _ELEMENT_MACROS and not two:
            element = self.range_of(call.target, scope)
            inner[bound[0]] = (element[0], (*element[1], ELEMENT)) if element else None
        else:
            inner.update(dict.fromkeys(bound))
        for arg in args[len(bound) :]:
            self.visit(arg, inner)
        return True


def references(source: str) -> list[Reference]:
    """Every field reference of ``source`` (an expression ``cel`` compiled), in source order;
    empty when this parser does not understand the expression."""
    try:
        tree = parse(source)
    except Unsupported:
        return []
    walk = _Walk()
    walk.visit(tree, {})
    return walk.found


def _holder(reference: Reference, depth: int) -> str:
    """The value whose field step ``depth`` reads: ``spec.input``, ``input.items[*]``."""
    if depth == 0:
        return "spec.input" if reference.root == "input" else reference.root
    return reference.root + step_text(reference.path[:depth])


def _problems(
    reference: Reference, resolution: Resolution
) -> Iterator[tuple[int, ProblemCode, Severity, str]]:
    if isinstance(resolution, Found):
        return
    depth = resolution.depth
    if reference.spans[depth] is None:
        return  # a step of a macro variable's range: reported where the range is written
    holder = _holder(reference, depth)
    if isinstance(resolution, NotObject):
        name = reference.path[depth]
        written = reference.text(depth - 1) if depth > reference.first else reference.written
        message = f"{written!r} is {resolution.kind}: it has no field {name!r}"
        yield depth, ProblemCode.UNKNOWN_CEL_FIELD, Severity.ERROR, message
        return
    text = reference.text(depth)
    hint = suggest(resolution.name, resolution.declared)
    if resolution.open is not None:
        yield (
            depth,
            ProblemCode.UNDECLARED_CEL_FIELD,
            Severity.WARNING,
            f"{text!r} is not declared in {holder}, which admits undeclared fields "
            f"({resolution.open}), so it is not checked{hint}",
        )
        return
    declared = ", ".join(resolution.declared)
    message = f"unknown field {text!r}{hint}" + (
        f" ({holder} declares: {declared})" if declared else f" ({holder} declares no fields)"
    )
    if reference.in_has:
        message += "; the has() test of it is always false"
    yield depth, ProblemCode.UNKNOWN_CEL_FIELD, Severity.ERROR, message


def check_cel_fields(
    document: Document, path: FieldPath, source: str, input_schema: Any
) -> list[ManifestProblem]:
    """Each field ``source`` reads that its variable's schema does not declare, located at the
    field's name (or index) inside the expression; ``input_schema`` is ``spec.input``."""
    resolvers = {name: SchemaFields(schema) for name, schema in CEL_VARIABLE_SCHEMAS.items()}
    resolvers["input"] = SchemaFields(input_schema)
    problems = []
    for reference in references(source):
        resolution = resolvers[reference.root].resolve(reference.path)
        for depth, code, severity, message in _problems(reference, resolution):
            span = reference.spans[depth]
            assert span is not None
            position = offset_position(document, path, span[0])
            problems.append(
                document.problem(path, code, message, position=position, severity=severity)
            )
    return problems
