"""The input fields ``spec.sensitive``, ``spec.approval.amend`` and ``spec.display`` name.

Each must be a property ``spec.input`` declares (a misspelt one is reported with a did-you-mean);
a sensitive pointer into a nested input value (``/input/payee/iban``) must also resolve where the
schema says which fields are there (``fields.resolve``): a misspelt pointer masks nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from signoff.core.visibility import PointerError, parse_sensitive
from signoff.manifest.errors import ProblemCode
from signoff.manifest.fields import Missing, NotObject, resolve
from signoff.manifest.shape import suggest

if TYPE_CHECKING:
    from signoff.manifest.meaning import DocumentCheck


def undeclared(declared: Any, name: str) -> str | None:
    """Why ``name`` is not a property ``declared`` (``spec.input.properties``) has, or ``None``."""
    names = [str(key) for key in declared] if isinstance(declared, dict) else []
    if name in names:
        return None
    return f"{name!r} is not a property of spec.input{suggest(name, names)}"


def _pointer_problem(schema: Any, path: tuple[str, ...]) -> str | None:
    """Why the input pointer ``path`` names nothing ``spec.input`` allows, or ``None``."""
    resolution = resolve(schema, path)
    if not isinstance(resolution, Missing | NotObject):
        return None
    pointer = "/input/" + "/".join(path[: resolution.depth + 1])
    if isinstance(resolution, NotObject):
        return f"{pointer!r} points into {resolution.kind}, which has no fields"
    if resolution.open is None:
        return (
            f"{pointer!r}: {resolution.name!r} is not declared there"
            f"{suggest(resolution.name, resolution.declared)}"
        )
    return None


def check_input_names(check: DocumentCheck) -> None:
    """Report each sensitive, amendable or displayed name ``spec.input`` does not declare."""
    declared = check.at("spec", "input", "properties")
    sensitive = check.at("spec", "sensitive")
    for index, name in enumerate(sensitive if isinstance(sensitive, list) else ()):
        if not isinstance(name, str):
            continue
        try:
            root, path = parse_sensitive(name)
        except PointerError as exc:
            check.report(("spec", "sensitive", index), ProblemCode.INVALID_VALUE, str(exc))
            continue
        # Output pointers cannot be checked against a schema the output need not have.
        if root != "input":
            continue
        problem = undeclared(declared, path[0])
        if problem is None and len(path) > 1:
            problem = _pointer_problem(check.at("spec", "input"), path)
        if problem is not None:
            check.report(("spec", "sensitive", index), ProblemCode.INVALID_VALUE, problem)
    amend = check.at("spec", "approval", "amend")
    for index, name in enumerate(amend if isinstance(amend, list) else ()):
        if not isinstance(name, str):
            continue
        problem = undeclared(declared, name)
        if problem is not None:
            check.report(("spec", "approval", "amend", index), ProblemCode.INVALID_VALUE, problem)
        elif name in _sensitive_inputs(sensitive):
            check.report(
                ("spec", "approval", "amend", index),
                ProblemCode.INVALID_VALUE,
                f"{name!r} is sensitive: approvers see it masked, so they cannot amend it",
            )
    display = check.at("spec", "display")
    for name, shown in display.items() if isinstance(display, dict) else ():
        problem = undeclared(declared, str(name))
        if problem is not None:
            check.report(("spec", "display", name), ProblemCode.INVALID_VALUE, problem)
        else:
            _money_has_currency(check, ("spec", "display", name), shown)
    previewed = check.at("spec", "preview", "display")
    for name, shown in previewed.items() if isinstance(previewed, dict) else ():
        _money_has_currency(check, ("spec", "preview", "display", name), shown)


def _money_has_currency(check: DocumentCheck, where: tuple[str, ...], shown: object) -> None:
    if isinstance(shown, dict) and shown.get("format") == "money" and not shown.get("currency"):
        check.report(
            (*where, "format"),
            ProblemCode.INVALID_VALUE,
            "money needs a currency (e.g. currency: EUR)",
        )


def _sensitive_inputs(sensitive: object) -> set[str]:
    """The input fields a sensitive entry masks whole or in part, however it is written
    (``note``, ``/input/note``, ``/input/payee/iban``): approvers cannot amend any of them."""
    found: set[str] = set()
    for entry in sensitive if isinstance(sensitive, list) else ():
        if not isinstance(entry, str):
            continue
        try:
            root, path = parse_sensitive(entry)
        except PointerError:
            continue
        if root == "input":
            found.add(path[0])
    return found
