"""YAML syntax errors as a person can act on them: the line that is wrong, and why.

PyYAML reports where its parser gave up, in its own words (``expected <block end>, but found
'<block mapping start>'``). For the usual mistakes — a key indented differently from its
siblings, a key without ``:``, a tab, an unclosed ``{`` — this names the line to fix and says what
to change. ``excerpt`` shows a problem's source line with a caret under its column.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from signoff.manifest.errors import ManifestProblem, ProblemCode

_INDENTATION = (
    "mapping values are not allowed here",
    "expected <block end>",
    "did not find expected key",
    "did not find expected '-' indicator",
)


def syntax_problem(file: str, text: str, exc: yaml.MarkedYAMLError) -> ManifestProblem:
    """The problem for a YAML syntax error, with its line corrected and a hint where we can."""
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return ManifestProblem(file, None, None, "", ProblemCode.YAML_SYNTAX, str(exc))
    line, column = mark.line + 1, mark.column + 1
    reason = " ".join(part for part in (exc.context, exc.problem) if part) or str(exc)
    problem = exc.problem or ""
    lines = text.splitlines()
    hint = ""
    if "could not find expected ':'" in problem and exc.context_mark is not None:
        # PyYAML notices on the next line; the key without ':' is where the scan started.
        line, column = exc.context_mark.line + 1, exc.context_mark.column + 1
        hint = "a key needs ':' after it (key: value)"
    elif "'\\t'" in problem:
        hint = "YAML indents with spaces only; replace the tab"
    elif "expected ',' or '}'" in problem and exc.context_mark is not None:
        hint = f"the '{{' on line {exc.context_mark.line + 1} is not closed on its line"
    elif "mapping values" in problem and _second_colon(lines, line, column):
        hint = "a value containing ': ' must be quoted (message: \"Note: ...\")"
    elif any(marker in problem for marker in _INDENTATION) and 0 < line <= len(lines):
        hint = _indentation_hint(lines, line)
        column = _indent(lines[line - 1]) + 1
    message = f"{reason}; hint: {hint}" if hint else reason
    return ManifestProblem(file, line, column, "", ProblemCode.YAML_SYNTAX, message)


def _second_colon(lines: list[str], line: int, column: int) -> bool:
    """The error sits at a ':' after the line's own key: a plain value with ': ' in it."""
    if not 0 < line <= len(lines):
        return False
    text = lines[line - 1]
    first = text.find(": ")
    at = column - 1  # 0-based index of the ':' PyYAML stopped at
    return 0 <= first < at < len(text) and text[at] == ":"


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _indentation_hint(lines: list[str], line: int) -> str:
    here = _indent(lines[line - 1])
    for number in range(line - 1, 0, -1):
        above = lines[number - 1]
        if above.strip() and not above.lstrip().startswith("#"):
            there = _indent(above)
            if there == here:
                break
            return (
                f"line {line} is indented {here} space{'s' * (here != 1)} and line {number} "
                f"{there}; keys of one mapping start in the same column, a nested mapping "
                "needs its parent key to end with ':'"
            )
    return "check the indentation of this line against the keys around it"


def excerpt(problem: ManifestProblem) -> str | None:
    """Two lines: the problem's source line and a caret under its column (or ``None``)."""
    if problem.line is None:
        return None
    try:
        lines = Path(problem.file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not 0 < problem.line <= len(lines):
        return None
    source = lines[problem.line - 1].replace("\t", " ")
    column = min(max(problem.column or 1, 1), len(source) + 1)
    gutter = f"{problem.line:>5} | "
    return f"{gutter}{source}\n{' ' * (len(gutter) - 2)}| {' ' * (column - 1)}^"
