"""Meaning checks of ``spec.executor.http``: the URL, headers, templates and the response mapping.

Every ``{{ input.x }}`` must name a field ``spec.input`` declares (an unknown one is an error with
file, line and field path); references may sit only in the URL's path, never in its scheme, host,
query or fragment, so no input can send the request elsewhere.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import httpx

from signoff.executors.http.executor import BODYLESS_METHODS, RESERVED_HEADERS, RESERVED_PREFIX
from signoff.executors.http.template import REFERENCE, Reference, references
from signoff.manifest.durations import parse_duration
from signoff.manifest.env import redacted_url
from signoff.manifest.errors import ProblemCode
from signoff.manifest.fields import Missing, resolve
from signoff.manifest.model import DURATION_PATTERN
from signoff.manifest.shape import suggest
from signoff.manifest.source import FieldPath

if TYPE_CHECKING:
    from signoff.manifest.meaning import DocumentCheck

BASE: FieldPath = ("spec", "executor", "http")
RESPONSE_ROOTS = ("body", "status", "headers")
MAX_DEADLINE = timedelta(hours=1)


def check_http(check: DocumentCheck) -> None:
    """Report every problem of the HTTP executor block and keep the expanded URL and headers."""
    _check_url(check)
    _check_deadline(check)
    _check_headers(check)
    query = check.at(*BASE, "query")
    if isinstance(query, dict):
        _check_input_refs(check, (*BASE, "query"), query)
    _check_body(check)
    _check_response(check)
    statuses = check.at(*BASE, "status_codes")
    for status in statuses if isinstance(statuses, dict) else ():
        if isinstance(status, int) and not 400 <= status <= 599:
            check.report(
                (*BASE, "status_codes", status),
                ProblemCode.INVALID_VALUE,
                f"status_codes maps HTTP error statuses (400-599), not {status}",
                key=True,
            )


def _check_deadline(check: DocumentCheck) -> None:
    raw = check.at(*BASE, "deadline")
    if not isinstance(raw, str) or re.fullmatch(DURATION_PATTERN, raw) is None:
        return  # absent (the default), or a syntax error the shape check reports
    if not timedelta(0) < parse_duration(raw) <= MAX_DEADLINE:
        check.report(
            (*BASE, "deadline"),
            ProblemCode.INVALID_VALUE,
            f"deadline must be more than 0 and at most 1h, not {raw}",
        )


def _check_url(check: DocumentCheck) -> None:
    raw = check.at(*BASE, "url")
    if not isinstance(raw, str):
        return
    path = (*BASE, "url")
    check.url = check.expand(path, raw)
    start, end = _path_span(check.url)
    for match in REFERENCE.finditer(check.url):
        if not start <= match.start() < end:
            check.report(
                path,
                ProblemCode.INVALID_VALUE,
                f"{match.group(0)} may appear only in the URL's path (use query: for parameters)",
            )
    _check_input_refs(check, path, check.url)
    probe = REFERENCE.sub("x", check.url)
    try:
        parsed = httpx.URL(probe)
        valid = parsed.scheme in ("http", "https") and bool(parsed.host)
    except httpx.InvalidURL:
        valid = False
    if not valid:
        expanded = " once expanded" if "${" in raw else ""
        check.report(
            path,
            ProblemCode.INVALID_VALUE,
            f"not an http(s) URL{expanded}: {redacted_url(check.url)!r}",
        )


def _path_span(url: str) -> tuple[int, int]:
    """Where the path of ``url`` starts and ends (after the authority, before ``?`` or ``#``)."""
    scheme_end = url.find("://")
    start = url.find("/", scheme_end + 3 if scheme_end >= 0 else 0)
    if start < 0:
        return len(url), len(url)
    ends = [i for i in (url.find("?", start), url.find("#", start)) if i >= 0]
    return start, min(ends, default=len(url))


def _check_headers(check: DocumentCheck) -> None:
    headers = check.at(*BASE, "headers")
    for name, value in headers.items() if isinstance(headers, dict) else ():
        path = (*BASE, "headers", name)
        lowered = str(name).lower()
        if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_PREFIX):
            check.report(
                path,
                ProblemCode.INVALID_VALUE,
                f"{name} is set by signoff (the operation id, run and tenant)",
                key=True,
            )
        if isinstance(value, str):
            if REFERENCE.search(value):
                check.report(
                    path,
                    ProblemCode.INVALID_VALUE,
                    "headers come from settings and the environment (${VAR}), not from the input",
                )
            check.headers[str(name)] = check.expand(path, value)


def _check_body(check: DocumentCheck) -> None:
    body = check.at(*BASE, "body")
    if not isinstance(body, dict):
        return
    method = check.at(*BASE, "method")
    if method in BODYLESS_METHODS:
        check.report(
            (*BASE, "body"), ProblemCode.INVALID_VALUE, f"{method} sends no body", key=True
        )
    kinds = [kind for kind in ("json", "form") if kind in body]
    if len(kinds) != 1:
        check.report(
            (*BASE, "body"),
            ProblemCode.INVALID_VALUE,
            "a body is json: (a template) or form: (fields), exactly one",
            key=True,
        )
    for kind in kinds:
        _check_input_refs(check, (*BASE, "body", kind), body[kind])


def _check_response(check: DocumentCheck) -> None:
    base = (*BASE, "response")
    output = check.at(*base, "output")
    for where, reference in references(output, (*base, "output")):
        if reference.root not in RESPONSE_ROOTS:
            check.report(
                where,
                ProblemCode.INVALID_VALUE,
                f"unknown response reference {reference.text!r}"
                f"{suggest(reference.root, RESPONSE_ROOTS)} (use body, status or headers)",
            )
    codes = check.at(*base, "codes")
    declared = check.at("spec", "results")
    for index, rule in enumerate(codes if isinstance(codes, list) else ()):
        if not isinstance(rule, dict):
            continue
        path = (*base, "codes", index)
        if ("field" in rule) != ("equals" in rule):
            check.report(path, ProblemCode.INVALID_VALUE, "field and equals go together", key=True)
        status = rule.get("status")
        may_be_2xx = status is None or status == "2xx" or (isinstance(status, int) and status < 300)
        code = rule.get("code")
        known = isinstance(declared, dict) and code in declared
        if may_be_2xx and isinstance(code, str) and not known:
            check.report(
                (*path, "code"),
                ProblemCode.INVALID_VALUE,
                f"{code} may match a 2xx response: declare it in spec.results with its status",
            )


def _check_input_refs(check: DocumentCheck, path: FieldPath, template: Any) -> None:
    schema = check.at("spec", "input")
    for where, reference in references(template, path):
        problem = _unknown_input(schema, reference)
        if problem is not None:
            check.report(where, ProblemCode.INVALID_VALUE, problem)


def _unknown_input(schema: Any, reference: Reference) -> str | None:
    """Why ``reference`` names nothing ``spec.input`` declares, or ``None`` when it does."""
    if reference.root != "input":
        return f"unknown reference {reference.text!r}: templates read the input (input.FIELD)"
    if not reference.path:
        return "a reference names an input field (input.FIELD), not the whole input"
    resolution = resolve(schema if isinstance(schema, dict) else {}, reference.path)
    if not isinstance(resolution, Missing):
        return None  # declared, or a free-form part of the input: nothing more to check
    if resolution.depth == 0 and not resolution.declared:
        return f"unknown input reference {reference.text!r} (spec.input declares no properties)"
    if not resolution.declared and resolution.open is not None:
        return None
    holder = ".".join(("input", *reference.path[: resolution.depth]))
    holder = "spec.input" if resolution.depth == 0 else holder
    return (
        f"unknown input reference {reference.text!r}"
        f"{suggest(resolution.name, resolution.declared)}"
        f" ({holder} declares: {', '.join(resolution.declared) or 'nothing'})"
    )
