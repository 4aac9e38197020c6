"""Manifest load errors: every problem of every file, each located by file, line and field path.

::

    ManifestErrors (ValueError)      raised once per load, carries every ManifestProblem
      .problems: [ManifestProblem]   file, line, column, path ("spec.policy.deny[1].when"), code
      .warnings: [ManifestProblem]   what loads but may not mean what was written (severity warning)

Problems carry a stable ``code`` (``ProblemCode``) so tools and tests never parse messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum


class ProblemCode(StrEnum):
    """What kind of mistake a manifest problem is."""

    UNREADABLE_FILE = "UNREADABLE_FILE"
    YAML_SYNTAX = "YAML_SYNTAX"
    DUPLICATE_KEY = "DUPLICATE_KEY"
    UNKNOWN_FIELD = "UNKNOWN_FIELD"
    MISSING_FIELD = "MISSING_FIELD"
    WRONG_TYPE = "WRONG_TYPE"
    INVALID_VALUE = "INVALID_VALUE"
    INVALID_CEL = "INVALID_CEL"
    UNKNOWN_CEL_VARIABLE = "UNKNOWN_CEL_VARIABLE"
    INVALID_JSON_SCHEMA = "INVALID_JSON_SCHEMA"
    UNIMPORTABLE_HOOK = "UNIMPORTABLE_HOOK"
    UNDEFINED_VARIABLE = "UNDEFINED_VARIABLE"
    DUPLICATE_ACTION_ID = "DUPLICATE_ACTION_ID"
    TOOL_NAME_COLLISION = "TOOL_NAME_COLLISION"
    SPLIT_VALUE = "SPLIT_VALUE"
    CEL_TYPE_ERROR = "CEL_TYPE_ERROR"
    UNKNOWN_CEL_FIELD = "UNKNOWN_CEL_FIELD"
    UNDECLARED_CEL_FIELD = "UNDECLARED_CEL_FIELD"
    UNDECLARED_CODE = "UNDECLARED_CODE"
    INVALID_TEST = "INVALID_TEST"
    NO_MANIFESTS = "NO_MANIFESTS"


class Severity(StrEnum):
    """An error stops the load; a warning is reported and the manifest loads."""

    ERROR = "error"
    WARNING = "warning"


def format_path(path: Sequence[str | int]) -> str:
    """``("spec", "policy", "deny", 1, "when")`` -> ``spec.policy.deny[1].when``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True, slots=True)
class ManifestProblem:
    """One mistake. ``line``/``column`` are 1-based; ``path`` is a field path within the document."""

    file: str
    line: int | None
    column: int | None
    path: str
    code: ProblemCode
    message: str
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        if self.severity is Severity.WARNING:
            where += ": warning"
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.message} [{self.code}]"


def _order(problem: ManifestProblem) -> tuple[str, int, int]:
    return (problem.file, problem.line or 0, problem.column or 0)


def in_file_order(problems: Iterable[ManifestProblem]) -> list[ManifestProblem]:
    return sorted(problems, key=_order)


class ManifestErrors(ValueError):
    """The manifest set is invalid; ``problems`` lists every mistake found, in file order, and
    ``warnings`` what was found besides (also in file order)."""

    def __init__(
        self, problems: Iterable[ManifestProblem], warnings: Iterable[ManifestProblem] = ()
    ) -> None:
        self.problems = in_file_order(problems)
        self.warnings = in_file_order(warnings)
        count = len(self.problems)
        header = f"{count} problem{'s' if count != 1 else ''} in the action manifests:"
        super().__init__("\n".join([header, *(f"  {p}" for p in self.problems)]))
