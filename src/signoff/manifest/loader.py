"""Load a directory of manifests: every file, every document, every problem in one pass."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from signoff.core.definition import tool_name
from signoff.core.registry import CompiledAction
from signoff.manifest.build import LoadedAction, build_action
from signoff.manifest.errors import (
    ManifestErrors,
    ManifestProblem,
    ProblemCode,
    Severity,
    in_file_order,
)
from signoff.manifest.hooks import add_import_root
from signoff.manifest.lint import split_values
from signoff.manifest.meaning import check_document
from signoff.manifest.shape import check_shape
from signoff.manifest.source import Document, read_documents

SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ManifestSet:
    """A valid set of actions, in file order, with what ``signoff check`` needs to report."""

    source: Path
    actions: tuple[LoadedAction, ...]
    warnings: tuple[ManifestProblem, ...] = ()
    """What loads but may not mean what was written (e.g. a CEL field an open schema does not
    declare), in file order."""

    @property
    def compiled(self) -> list[CompiledAction]:
        return [action.compiled for action in self.actions]


def manifest_files(source: Path) -> list[Path]:
    """``source`` itself when it is a file, else its ``*.yaml``/``*.yml`` files (recursively,
    skipping hidden names), sorted by path so loads are reproducible."""
    if source.is_file():
        return [source]
    found = []
    for path in source.rglob("*"):
        hidden = any(part.startswith(".") for part in path.relative_to(source).parts)
        if path.suffix in SUFFIXES and not hidden and path.is_file():
            found.append(path)
    return sorted(found)


def load_manifests(source: Path | str, *, environ: Mapping[str, str] | None = None) -> ManifestSet:
    """Load and compile every manifest under ``source`` (a directory or one file).

    Hooks are imported with the manifest directory's parent on ``sys.path``, so a project's
    ``billing.executors:cancel_invoice`` resolves from ``billing/`` beside ``manifests/``.
    Raises ``ManifestErrors`` listing every problem of every file.
    """
    source = Path(source)
    environ = os.environ if environ is None else environ
    if not source.exists():
        raise ManifestErrors(
            [ManifestProblem(str(source), None, None, "", ProblemCode.NO_MANIFESTS, "not found")]
        )
    files = manifest_files(source)
    if not files:
        raise ManifestErrors(
            [
                ManifestProblem(
                    str(source), None, None, "", ProblemCode.NO_MANIFESTS,
                    "no *.yaml or *.yml manifests found",
                )
            ]
        )  # fmt: skip
    add_import_root(source if source.is_dir() else source.parent)

    texts: list[tuple[str, str]] = []
    problems: list[ManifestProblem] = []
    for path in files:
        try:
            texts.append((str(path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(
                ManifestProblem(str(path), None, None, "", ProblemCode.UNREADABLE_FILE, str(exc))
            )
    return _load(source, texts, problems, environ, import_hooks=True)


def load_manifest_texts(files: Mapping[str, str], *, label: str = "request") -> ManifestSet:
    """Load manifests given as texts (name -> YAML), checked as ``signoff check`` checks a
    directory — except that nothing is imported (a hook reference is checked for its form)
    and no environment variable is read (``${VAR}`` needs a default: ``${VAR:-x}``), so a
    text from outside the server can neither run code nor read its settings. The actions it
    defines run nothing (a replay). Raises ``ManifestErrors`` listing every problem."""
    if not files:
        raise ManifestErrors(
            [ManifestProblem(label, None, None, "", ProblemCode.NO_MANIFESTS, "no manifests given")]
        )
    return _load(Path(label), sorted(files.items()), [], {}, import_hooks=False)


def _load(
    source: Path,
    texts: list[tuple[str, str]],
    problems: list[ManifestProblem],
    environ: Mapping[str, str],
    *,
    import_hooks: bool,
) -> ManifestSet:
    warnings: list[ManifestProblem] = []
    actions: list[LoadedAction] = []
    seen: dict[str, tuple[str, str]] = {}
    for name, text in texts:
        documents, syntax = read_documents(name, text)
        problems.extend(syntax)
        for document in documents:
            problems.extend(split_values(document, text))
        for document in documents:
            manifest, shape = check_shape(document)
            build = check_document(document, environ, import_hooks=import_hooks)
            problems.extend(shape)
            errors = [p for p in build.problems if p.severity is Severity.ERROR]
            problems.extend(errors)
            warnings.extend(p for p in build.problems if p.severity is Severity.WARNING)
            action_id = build.at("metadata", "id")
            if isinstance(action_id, str):
                problem = _name_clash(action_id, document, seen)
                if problem is not None:
                    problems.append(problem)
            if manifest is None or errors:
                continue
            loaded, found = build_action(build, manifest)
            problems.extend(found)
            if loaded is not None:
                actions.append(loaded)
    if problems:
        raise ManifestErrors(problems, warnings)
    return ManifestSet(source, tuple(actions), tuple(in_file_order(warnings)))


def _name_clash(
    action_id: str, document: Document, seen: dict[str, tuple[str, str]]
) -> ManifestProblem | None:
    """A second action with this id, or with an id that maps to the same MCP tool name.

    ``seen`` maps tool names to (action id, ``file:line``) of the first action that took them.
    """
    name = tool_name(action_id)
    first = seen.get(name)
    if first is None:
        line = document.position(("metadata", "id"))[0]
        seen[name] = (action_id, f"{document.file}:{line}")
        return None
    other_id, where = first
    if other_id == action_id:
        return document.problem(
            ("metadata", "id"),
            ProblemCode.DUPLICATE_ACTION_ID,
            f"action {action_id!r} is already defined at {where}",
        )
    return document.problem(
        ("metadata", "id"),
        ProblemCode.TOOL_NAME_COLLISION,
        f"action {action_id!r} and action {other_id!r} at {where} would both be the MCP tool "
        f"{name!r} (dots become underscores); rename one of them",
    )


def load_manifest_dir(
    source: Path | str, *, environ: Mapping[str, str] | None = None
) -> list[CompiledAction]:
    """The compiled actions of a manifest directory; raises ``ManifestErrors`` on any problem."""
    return load_manifests(source, environ=environ).compiled
