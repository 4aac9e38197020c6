"""Strict YAML reading that remembers where every value came from.

PyYAML's composer gives nodes with marks; we build plain Python values from them ourselves so each
field path (``("spec", "policy", "deny", 1, "when")``) maps to its key and value nodes. Duplicate keys,
which PyYAML silently accepts, are reported. Timestamps stay strings: manifests carry JSON data.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from signoff.manifest.errors import ManifestProblem, ProblemCode, Severity, format_path
from signoff.manifest.yaml_hints import syntax_problem

FieldPath = tuple[str | int, ...]

_PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


@dataclass
class Document:
    """One YAML document: its plain data and the nodes each field path was read from."""

    file: str
    index: int
    data: Any = None
    values: dict[FieldPath, Node] = field(default_factory=dict)
    keys: dict[FieldPath, Node] = field(default_factory=dict)

    def node(self, path: FieldPath) -> Node | None:
        """The value node at ``path``, or ``None`` when the path does not exist in the document."""
        return self.values.get(path)

    def position(self, path: FieldPath, *, key: bool = False) -> tuple[int, int]:
        """1-based line and column of ``path``, or of its nearest existing ancestor.

        With ``key=True`` a mapping entry points at its key (where an unknown field is spelled).
        """
        for end in range(len(path), -1, -1):
            prefix = path[:end]
            node = self.keys.get(prefix) if key else None
            node = node or self.values.get(prefix)
            if node is not None:
                return node.start_mark.line + 1, node.start_mark.column + 1
        return 1, 1

    def problem(
        self,
        path: FieldPath,
        code: ProblemCode,
        message: str,
        *,
        key: bool = False,
        position: tuple[int, int] | None = None,
        severity: Severity = Severity.ERROR,
    ) -> ManifestProblem:
        line, column = position if position is not None else self.position(path, key=key)
        return ManifestProblem(self.file, line, column, format_path(path), code, message, severity)


class _Builder:
    def __init__(self, document: Document) -> None:
        self.document = document
        self.problems: list[ManifestProblem] = []
        self._constructor = SafeConstructor()

    def value(self, node: Node, path: FieldPath) -> Any:
        self.document.values[path] = node
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.value(item, (*path, i)) for i, item in enumerate(node.value)]
        assert isinstance(node, ScalarNode)
        return self._scalar(node)

    def _scalar(self, node: ScalarNode) -> Any:
        if node.tag not in _PLAIN_TAGS:
            return node.value  # timestamps, custom tags: keep the text as written
        return self._constructor.construct_object(node, deep=True)

    def _mapping(self, node: MappingNode, path: FieldPath) -> dict[Any, Any]:
        try:
            self._constructor.flatten_mapping(node)  # YAML merge keys (<<: *anchor)
        except ConstructorError as exc:
            self.problems.append(self.document.problem(path, ProblemCode.INVALID_VALUE, str(exc)))
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                self.problems.append(
                    self.document.problem(
                        path,
                        ProblemCode.WRONG_TYPE,
                        "mapping keys must be plain scalars",
                        position=_mark(key_node),
                    )
                )
                continue
            key = self._scalar(key_node)
            if not isinstance(key, str | int) or isinstance(key, bool):
                key = key_node.value
            child = (*path, key)
            if key in out:
                self.problems.append(
                    self.document.problem(
                        child,
                        ProblemCode.DUPLICATE_KEY,
                        f"duplicate key {key!r}; a key may appear once",
                        position=_mark(key_node),
                    )
                )
                continue
            self.document.keys[child] = key_node
            out[key] = self.value(value_node, child)
        return out


def _mark(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def read_documents(file: str, text: str) -> tuple[list[Document], list[ManifestProblem]]:
    """Every non-empty document of ``text``; a syntax error ends the file but keeps earlier ones."""
    documents: list[Document] = []
    problems: list[ManifestProblem] = []
    nodes: Iterator[Node] = yaml.compose_all(text, Loader=yaml.SafeLoader)
    index = 0
    try:
        for root in nodes:
            if root is None:  # pragma: no cover - compose_all skips empty documents
                continue
            document = Document(file, index)
            builder = _Builder(document)
            document.data = builder.value(root, ())
            problems.extend(builder.problems)
            documents.append(document)
            index += 1
    except yaml.MarkedYAMLError as exc:
        problems.append(syntax_problem(file, text, exc))
    except yaml.YAMLError as exc:  # pragma: no cover - e.g. reader errors on control characters
        problems.append(ManifestProblem(file, None, None, "", ProblemCode.YAML_SYNTAX, str(exc)))
    return documents, problems
