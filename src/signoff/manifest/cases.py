"""Manifest ``tests:`` cases: the decision before execution, evaluated without executing anything."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from signoff.core.admission import admit
from signoff.core.codes import Code
from signoff.core.identity import Channel, Principal, ProposerType
from signoff.core.limit_stage import checks_for
from signoff.core.limits import LimitDecision, measure_totals
from signoff.core.policy import PolicyInput
from signoff.core.registry import CompiledAction
from signoff.core.results import ExecutionResult
from signoff.core.run import ActionRun
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
    """The code the pipeline would reach before dispatch, by the pipeline's own stages
    (``admission.admit``), then whether approval is required."""
    request = PolicyInput(
        principal=Principal(id=case.principal.id, roles=tuple(case.principal.roles)),
        tenant_id=case.tenant,
        proposer_type=ProposerType(case.proposer),
        channel=Channel(case.channel),
        input=case.input,
        now=now,
    )
    verdict = admit(action, request, case.input, None, check_keys=False)
    if verdict.refusal is not None:
        return verdict.refusal.code, verdict.refusal.message
    assert verdict.decision is not None
    run = ActionRun(
        run_id="case",
        tenant_id=case.tenant,
        action_id=action.id,
        principal=request.principal,
        channel=request.channel,
        proposer_type=request.proposer_type,
        input=case.input,
        resource=verdict.decision.resource,
        created_at=now,
        updated_at=now,
    )
    checks = checks_for(action, run, request)
    if isinstance(checks, ExecutionResult):
        return checks.code, checks.message
    usages = []
    for check in checks:
        prior = case.usage.get(check.spec.name)
        usages.append(
            measure_totals(check, prior.count if prior else 0, float(prior.sum) if prior else 0.0)
        )
    limits = LimitDecision(tuple(usages))
    if limits.denied:
        return Code.LIMIT_EXCEEDED, "; ".join(u.describe() for u in limits.denied)
    if verdict.decision.approval_required or limits.needs_approval:
        reason = "; ".join(u.describe() for u in limits.exceeded)
        return Code.APPROVAL_REQUIRED, reason or "approval required"
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
