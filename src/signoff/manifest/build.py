"""A checked manifest document -> an ``ActionDefinition`` -> a ``CompiledAction``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from signoff.core.codes import ExecutionStatus, RetryDisposition
from signoff.core.definition import (
    ActionDefinition,
    ApprovalSpec,
    ConfirmFallback,
    ConfirmSpec,
    DenyRule,
    DisplayFormat,
    Escalation,
    ExecutorMode,
    FieldDisplay,
    IdempotencySpec,
    OrphanPolicy,
    PolicySpec,
    ResultMapping,
    RetrySpec,
)
from signoff.core.limits import LimitSpec, LimitSubject, OnExceed
from signoff.core.registry import CompiledAction, InvalidDefinition, compile_action
from signoff.executors.http.executor import HttpExecutor
from signoff.executors.http.response import PASS_THROUGH, CodeRule, ResponseSpec
from signoff.executors.http.template import parse_reference
from signoff.manifest.durations import parse_duration
from signoff.manifest.errors import ManifestProblem, ProblemCode
from signoff.manifest.meaning import DocumentCheck
from signoff.manifest.model import Confirm, Display, Manifest, ResultSpec, Retry
from signoff.manifest.shape import document_path


@dataclass(frozen=True, slots=True)
class LoadedAction:
    """One action as loaded: the compiled action plus what ``signoff check`` reports about it."""

    compiled: CompiledAction
    manifest: Manifest
    file: str
    line: int
    case_lines: tuple[int, ...]

    @property
    def id(self) -> str:
        return self.compiled.id

    @property
    def executor_label(self) -> str:
        """``python module:function`` or ``http POST <url as written, variables unexpanded>``."""
        executor = self.manifest.spec.executor
        if executor.http is not None:
            return f"http {executor.http.method} {executor.http.url}"
        return f"python {executor.python}"


def definition_of(check: DocumentCheck, manifest: Manifest) -> ActionDefinition:
    """The definition of a clean document (shape and meaning both checked)."""
    spec, metadata = manifest.spec, manifest.metadata
    executor: Callable[..., Any] | None = check.executor
    # A manifest's executor answers with its results: codes (or an HTTP executor's own) only.
    executor_codes: tuple[str, ...] = ()
    if spec.executor.http is not None:
        executor = http_executor(check, manifest)
        executor_codes = executor.declared_codes
    assert executor is not None
    approval = ApprovalSpec()
    if spec.approval is not None:
        approval = ApprovalSpec(
            when=_condition(spec.approval.when),
            explain=spec.approval.explain,
            approver_roles=tuple(spec.approval.approvers.roles),
            count=spec.approval.approvers.count,
            expires_after=parse_duration(spec.approval.expires_after),
            amend=tuple(spec.approval.amend),
            escalate=tuple(
                Escalation(when=_condition(tier.when), count=tier.count, explain=tier.explain)
                for tier in spec.approval.escalate
            ),
            confirm=_confirm(spec.approval.confirm),
        )
    deny = tuple(
        DenyRule(when=_condition(rule.when), code=rule.code, message=rule.message)
        for rule in spec.policy.deny
    )
    roles = tuple(spec.policy.roles) if spec.policy.roles is not None else None
    return ActionDefinition(
        id=metadata.id,
        title=metadata.title,
        description=metadata.description,
        effect=spec.effect,
        risk=spec.risk,
        input_schema=spec.input,
        output_schema=spec.output,
        resource=spec.resource,
        idempotency=IdempotencySpec(key=spec.idempotency.key, scope=spec.idempotency.scope),
        policy=PolicySpec(roles=roles, deny=deny),
        approval=approval,
        guard=check.guard,
        preview=check.preview,
        executor=executor,
        mode=ExecutorMode(spec.executor.mode),
        cancel=check.cancel,
        orphan=OrphanPolicy(spec.executor.orphan),
        callback_secret=check.callback_secret,
        timeout=parse_duration(spec.executor.timeout) if spec.executor.timeout else None,
        executor_idempotent=spec.executor.idempotent,
        retry=_retry(spec.executor.retry),
        results={code: _result(result) for code, result in spec.results.items()},
        executor_codes=executor_codes,
        sensitive_fields=tuple(spec.sensitive),
        display=_displays(spec.display),
        preview_display=_displays(spec.preview.display) if spec.preview is not None else {},
        limits=tuple(
            LimitSpec(
                name=limit.name,
                per=LimitSubject(limit.per),
                window=parse_duration(limit.window),
                count=limit.count,
                sum=limit.sum,
                max=float(limit.max) if limit.max is not None else None,
                on_exceed=OnExceed(limit.on_exceed),
            )
            for limit in spec.limits
        ),
        source=f"{check.document.file}:{check.document.position(())[0]}",
    )


def http_executor(check: DocumentCheck, manifest: Manifest) -> HttpExecutor:
    """The HTTP executor of a clean document (its URL and headers expanded by ``check``)."""
    executor = manifest.spec.executor
    http = executor.http
    assert http is not None
    response = http.response
    body_kind, body = "input", None
    if http.body is not None and http.body.form is not None:
        body_kind, body = "form", dict(http.body.form)
    elif http.body is not None:
        body_kind, body = "json", http.body.json_
    return HttpExecutor(
        deferred=executor.mode == "deferred",
        url=check.url,
        method=http.method,
        timeout=parse_duration(http.timeout).total_seconds(),
        deadline=parse_duration(http.deadline).total_seconds(),
        headers=check.headers,
        query=dict(http.query),
        body_kind=body_kind,
        body=body,
        response=ResponseSpec(
            output=response.output if response.output is not None else PASS_THROUGH,
            codes=tuple(
                CodeRule(
                    code=rule.code,
                    status=rule.status,
                    field=parse_reference(rule.field) if rule.field else None,
                    equals=rule.equals,
                )
                for rule in response.codes
            ),
            status_codes=dict(http.status_codes),
            max_bytes=response.max_bytes,
        ),
    )


def _retry(spec: Retry | None) -> RetrySpec | None:
    if spec is None:
        return None
    return RetrySpec(attempts=spec.attempts, backoff=parse_duration(spec.backoff))


def _condition(value: str | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _result(spec: ResultSpec) -> ResultMapping:
    status = ExecutionStatus(spec.status)
    if spec.retry is not None:
        retry = RetryDisposition(spec.retry)
    elif status is ExecutionStatus.FAILED:
        retry = RetryDisposition.MANUAL_REVIEW
    else:
        retry = RetryDisposition.NEVER
    return ResultMapping(status=status, retry=retry, message=spec.message)


def build_action(
    check: DocumentCheck, manifest: Manifest
) -> tuple[LoadedAction | None, list[ManifestProblem]]:
    """Compile a clean document into a loaded action."""
    document = check.document
    try:
        compiled = compile_action(definition_of(check, manifest))
    except InvalidDefinition as exc:  # pragma: no cover - the checks above come first
        return None, [
            document.problem(
                ("spec", *document_path(problem.path.split(" ")[0])),
                ProblemCode.INVALID_VALUE,
                problem.message,
            )
            for problem in exc.problems
        ]
    except ValidationError as exc:  # pragma: no cover - the model mirrors the definition
        return None, [document.problem(("spec",), ProblemCode.INVALID_VALUE, str(exc))]
    lines = tuple(document.position(("tests", i))[0] for i in range(len(manifest.tests)))
    loaded = LoadedAction(compiled, manifest, document.file, document.position(())[0], lines)
    return loaded, []


def _displays(declared: Mapping[str, Display]) -> dict[str, FieldDisplay]:
    return {
        name: FieldDisplay(
            format=DisplayFormat(shown.format),
            currency=shown.currency,
            minor_units=shown.minor_units,
        )
        for name, shown in declared.items()
    }


def _confirm(confirm: Confirm | str | None) -> ConfirmSpec | None:
    if confirm is None:
        return None
    if isinstance(confirm, str):  # the shorthand ``confirm: requester``
        return ConfirmSpec()
    return ConfirmSpec(
        when=_condition(confirm.when),
        fallback=ConfirmFallback(confirm.fallback),
        wait=parse_duration(confirm.wait),
    )
