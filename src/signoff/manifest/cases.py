"""Manifest ``tests:`` cases: the decision before execution, evaluated without executing anything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from signoff.core.codes import Code
from signoff.core.compiled import CompiledAction, validate_input
from signoff.core.identity import Channel, Principal, ProposerType
from signoff.core.policy import PolicyInput, evaluate_policy
from signoff.manifest.loader import ManifestSet
from signoff.manifest.model import ManifestCase


@dataclass(frozen=True, slots=True)
class CaseResult:
    action_id: str
    name: str
    file: str
    line: int
    expected: str
    actual: str
    detail: str

    @property
    def passed(self) -> bool:
        return self.expected == self.actual


def decide(action: CompiledAction, case: ManifestCase, now: datetime) -> tuple[str, str]:
    """The code the pipeline would reach before dispatch: validation, policy, then approval."""
    errors = validate_input(action, case.input)
    if errors:
        return Code.INPUT_VALIDATION_FAILED, f"{errors[0]['path']}: {errors[0]['message']}"
    decision = evaluate_policy(
        action,
        PolicyInput(
            principal=Principal(id=case.principal.id, roles=tuple(case.principal.roles)),
            tenant_id=case.tenant,
            proposer_type=ProposerType(case.proposer),
            channel=Channel(case.channel),
            input=case.input,
            now=now,
        ),
    )
    if decision.denial is not None:
        return decision.denial.code, decision.denial.message
    if decision.approval_required:
        return Code.APPROVAL_REQUIRED, "approval required"
    return Code.SUCCEEDED, "would dispatch without approval"


def run_cases(manifests: ManifestSet, now: datetime | None = None) -> list[CaseResult]:
    """Every case of every action, in file order."""
    moment = now or datetime.now(UTC)
    results = []
    for action in manifests.actions:
        for case, line in zip(action.manifest.tests, action.case_lines, strict=True):
            actual, detail = decide(action.compiled, case, moment)
            results.append(
                CaseResult(action.id, case.name, action.file, line, case.expect, actual, detail)
            )
    return results
