"""Meaning checks of one manifest document: everything a field's type cannot say.

CEL expressions, the input JSON Schema, hook imports, environment variables and cross-field rules
are checked on the document's raw data, so they are reported even when the same document also has
shape errors (a misspelt field elsewhere): one run shows every problem.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from signoff.core.codes import Code
from signoff.manifest.cel_fields import check_cel_fields
from signoff.manifest.env import substitute
from signoff.manifest.errors import ManifestProblem, ProblemCode, Severity
from signoff.manifest.expressions import check_cel, check_input_schema
from signoff.manifest.hooks import HookImportError, import_hook
from signoff.manifest.http_checks import check_http
from signoff.manifest.input_names import check_input_names
from signoff.manifest.lint import cel_type_errors, required_undeclared, undeclared_status_codes
from signoff.manifest.model import DEFAULT_INPUT_SCHEMA, HOOK_PATTERN
from signoff.manifest.source import Document, FieldPath

_PRE_EXECUTION_CODES = frozenset(
    {
        Code.SUCCEEDED,
        Code.INPUT_VALIDATION_FAILED,
        Code.POLICY_DENIED,
        Code.POLICY_EVALUATION_ERROR,
        Code.APPROVAL_REQUIRED,
        Code.LIMIT_EXCEEDED,
    }
)


class DocumentCheck:
    """Checks one document's meaning; collects problems and the parts the definition needs."""

    def __init__(
        self, document: Document, environ: Mapping[str, str], *, import_hooks: bool = True
    ) -> None:
        self.document = document
        self.environ = environ
        self.import_hooks = import_hooks
        self.problems: list[ManifestProblem] = []
        self.guard: Callable[..., Any] | None = None
        self.preview: Callable[..., Any] | None = None
        self.executor: Callable[..., Any] | None = None
        self.cancel: Callable[..., Any] | None = None
        self.callback_secret: str | None = None
        self.url = ""
        self.headers: dict[str, str] = {}
        self.compiled: list[FieldPath] = []  # the CEL expressions that compiled cleanly

    def at(self, *path: str | int) -> Any:
        """The raw value at ``path``, or ``None`` when absent or not reachable."""
        value: Any = self.document.data
        for part in path:
            if isinstance(value, dict):
                value = value.get(part)
            elif isinstance(value, list) and isinstance(part, int) and part < len(value):
                value = value[part]
            else:
                return None
        return value

    def report(
        self, path: FieldPath, code: ProblemCode, message: str, *, key: bool = False
    ) -> None:
        self.problems.append(self.document.problem(path, code, message, key=key))

    def cel_paths(self) -> list[FieldPath]:
        """Every CEL expression of the document: resource, deny rules, approval rule and
        tiers, limit sums (whatever their shape; absent ones are skipped by ``cel``)."""
        paths: list[FieldPath] = [("spec", "resource")]
        for base, name in (
            (("spec", "policy", "deny"), "when"),
            (("spec", "approval", "escalate"), "when"),
            (("spec", "limits"), "sum"),
        ):
            rules = self.at(*base)
            paths += [(*base, i, name) for i in range(len(rules) if isinstance(rules, list) else 0)]
        return [*paths, ("spec", "approval", "when"), ("spec", "approval", "confirm", "when")]

    def cel(self, path: FieldPath) -> None:
        source = self.at(*path)
        if isinstance(source, str):
            found = check_cel(self.document, path, source)
            self.problems.extend(found)
            if not found:
                self.compiled.append(path)

    def input_schema(self) -> Any:
        """``spec.input`` as the expressions see it (``None``: not a usable schema)."""
        schema = self.at("spec", "input")
        if schema is None and isinstance(self.at("spec"), dict):
            return DEFAULT_INPUT_SCHEMA
        broken = any(
            p.code is ProblemCode.INVALID_JSON_SCHEMA and p.path.startswith("spec.input")
            for p in self.problems
        )
        return schema if isinstance(schema, dict) and not broken else None

    def hook(self, *path: str | int) -> Callable[..., Any] | None:
        reference = self.at(*path)
        if not isinstance(reference, str) or not re.match(HOOK_PATTERN, reference):
            return None  # absent, or a shape error already says what is wrong
        if not self.import_hooks:
            return not_imported(reference)
        try:
            return import_hook(reference)
        except HookImportError as exc:
            self.report(path, ProblemCode.UNIMPORTABLE_HOOK, str(exc))
            return None

    def expand(self, path: FieldPath, text: str) -> str:
        result = substitute(text, self.environ)
        for name in result.missing:
            self.report(
                path,
                ProblemCode.UNDEFINED_VARIABLE,
                f"environment variable {name} is not set and has no default (${{{name}:-...}})",
            )
        if result.malformed:
            self.report(
                path, ProblemCode.INVALID_VALUE, "malformed ${...}: use ${NAME} or ${NAME:-default}"
            )
        return result.value

    def check_executor(self) -> None:
        base: FieldPath = ("spec", "executor")
        executor = self.at(*base)
        if not isinstance(executor, dict):
            return
        python, http = executor.get("python"), executor.get("http")
        if python is None and http is None:
            self.report(
                base, ProblemCode.MISSING_FIELD, "an executor needs python or http", key=True
            )
        elif python is not None and http is not None:
            self.report(
                (*base, "http"),
                ProblemCode.INVALID_VALUE,
                "give python or http, not both",
                key=True,
            )
        elif python is not None:
            self.executor = self.hook(*base, "python")
        elif isinstance(http, dict):
            check_http(self)
        self.check_deferred(executor)

    def check_deferred(self, executor: dict[Any, Any]) -> None:
        base: FieldPath = ("spec", "executor")
        if executor.get("mode") == "deferred":
            if executor.get("timeout") is None:
                self.report(
                    (*base, "timeout"),
                    ProblemCode.MISSING_FIELD,
                    "deferred work needs a timeout: the deadline for the external completion",
                    key=True,
                )
            self.cancel = self.hook(*base, "cancel")
            secret = executor.get("callback_secret")
            if isinstance(secret, str):
                self.callback_secret = self.expand((*base, "callback_secret"), secret)
            if "retry" in executor:
                self.report(
                    (*base, "retry"),
                    ProblemCode.INVALID_VALUE,
                    "retry applies to sync and async work (deferred work is completed externally)",
                    key=True,
                )
            return
        for name in ("cancel", "orphan", "callback_secret"):
            if name in executor:
                self.report(
                    (*base, name),
                    ProblemCode.INVALID_VALUE,
                    f"{name} applies to mode: deferred only",
                    key=True,
                )

    def check_rest(self) -> None:
        if (
            self.at("spec", "idempotency", "scope") == "resource"
            and self.at("spec", "resource") is None
        ):
            self.report(
                ("spec", "idempotency", "scope"),
                ProblemCode.INVALID_VALUE,
                "scope: resource needs a spec.resource expression naming the resource",
            )
        results = self.at("spec", "results")
        for code, spec in results.items() if isinstance(results, dict) else ():
            succeeded = isinstance(spec, dict) and spec.get("status") == "SUCCEEDED"
            if succeeded and spec.get("retry") not in (None, "NEVER"):
                self.report(
                    ("spec", "results", code, "retry"),
                    ProblemCode.INVALID_VALUE,
                    "a SUCCEEDED result is never retried (retry: NEVER)",
                )
        check_input_names(self)
        deny = self.at("spec", "policy", "deny")
        allowed = _PRE_EXECUTION_CODES | {
            rule.get("code", Code.POLICY_DENIED)
            for rule in (deny if isinstance(deny, list) else ())
            if isinstance(rule, dict)
        }
        tests = self.at("tests")
        limits = self.at("spec", "limits")
        names = {
            limit.get("name")
            for limit in (limits if isinstance(limits, list) else ())
            if isinstance(limit, dict)
        }
        for index, case in enumerate(tests if isinstance(tests, list) else ()):
            usage = case.get("usage") if isinstance(case, dict) else None
            for name in usage if isinstance(usage, dict) else ():
                if name not in names:
                    self.report(
                        ("tests", index, "usage", name),
                        ProblemCode.INVALID_TEST,
                        f"{name!r} is not one of this action's limits",
                        key=True,
                    )
            expect = case.get("expect") if isinstance(case, dict) else None
            if isinstance(expect, str) and expect not in allowed:
                self.report(
                    ("tests", index, "expect"),
                    ProblemCode.INVALID_TEST,
                    f"{expect} cannot be decided before execution; expect one of "
                    + ", ".join(sorted(map(str, allowed))),
                )

    def check_limits(self) -> None:
        limits = self.at("spec", "limits")
        seen: set[str] = set()
        for index, limit in enumerate(limits if isinstance(limits, list) else ()):
            if not isinstance(limit, dict):
                continue
            path = ("spec", "limits", index)
            if ("sum" in limit) != ("max" in limit):
                self.report(
                    (*path, "sum" if "sum" in limit else "max"),
                    ProblemCode.INVALID_VALUE,
                    "sum and max go together: sum is a CEL number, max its bound",
                )
            if "count" not in limit and "sum" not in limit:
                self.report(
                    path, ProblemCode.INVALID_VALUE, "a limit needs count and/or sum with max"
                )
            if limit.get("per") == "resource" and self.at("spec", "resource") is None:
                self.report(
                    (*path, "per"),
                    ProblemCode.INVALID_VALUE,
                    "per: resource needs a spec.resource expression naming the resource",
                )
            name = limit.get("name")
            if isinstance(name, str):
                if name in seen:
                    self.report((*path, "name"), ProblemCode.INVALID_VALUE, f"limit {name!r} twice")
                seen.add(name)

    def check(self) -> None:
        """Every meaning check, each on whatever raw value is there."""
        schema = self.at("spec", "input")
        if isinstance(schema, dict):
            self.problems.extend(check_input_schema(self.document, ("spec", "input"), schema))
        output = self.at("spec", "output")
        if isinstance(output, dict):
            self.problems.extend(
                check_input_schema(self.document, ("spec", "output"), output, role="output")
            )
        for path in self.cel_paths():
            self.cel(path)
        self.check_limits()
        self.guard = self.hook("spec", "guard")
        self.preview = self.hook("spec", "preview", "python")
        self.check_executor()
        self.check_rest()
        self.check_lint()

    def check_lint(self) -> None:
        """What loads but does not mean what was written (``lint``, ``cel_fields``)."""
        schema = self.input_schema()  # before the lint's own schema problems below
        self.problems.extend(required_undeclared(self.document, self.at("spec", "input")))
        action = {
            "id": str(self.at("metadata", "id")),
            "effect": str(self.at("spec", "effect")),
            "risk": str(self.at("spec", "risk")),
        }
        for path in self.compiled:
            source = self.at(*path)
            assert isinstance(source, str)
            fields = check_cel_fields(self.document, path, source, schema)
            self.problems.extend(fields)
            if schema is not None and all(p.severity is not Severity.ERROR for p in fields):
                self.problems.extend(cel_type_errors(self.document, path, source, schema, action))
        self.problems.extend(
            undeclared_status_codes(
                self.document,
                self.at("spec", "executor", "http", "status_codes"),
                self.at("spec", "results"),
            )
        )


def not_imported(reference: str) -> Callable[..., Any]:
    """A hook named but not imported (definitions loaded for a replay, which runs none)."""

    def refuse(_context: Any) -> Any:
        raise RuntimeError(f"{reference} was not imported: these definitions run nothing")

    return refuse


def check_document(
    document: Document, environ: Mapping[str, str], *, import_hooks: bool = True
) -> DocumentCheck:
    """Run the meaning checks of one document (whatever its shape); ``import_hooks=False``
    checks a hook reference's form only."""
    build = DocumentCheck(document, environ, import_hooks=import_hooks)
    if isinstance(document.data, dict):
        build.check()
    return build
