"""Who may read a run and what of it they see (contract §5), as one rule: ``core.visibility``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from signoff.core.answers import outcome_of
from signoff.core.definition import ActionDefinition, IdempotencySpec
from signoff.core.identity import Principal
from signoff.core.results import ExecutionResult
from signoff.core.run import ApprovalDecision, ApprovalState, ApprovalVote, DuplicateScope
from signoff.core.visibility import (
    MASK,
    PointerError,
    Reader,
    ReaderKind,
    mask_document,
    masked_outcome,
    masked_run,
    may_read,
    parse_sensitive,
)
from tests.helpers import AGENT, LEAD, Recorder, bare_run, definition

AT = datetime(2026, 1, 1, tzinfo=UTC)
OTHER_AGENT = Principal(id="agent-2", roles=("billing",))
OTHER_LEAD = Principal(id="lead-2", roles=("billing-lead",))
# An agent whose token lists the approver role: still an agent when it reads.
AGENT_WITH_LEAD_ROLE = Principal(id="agent-3", roles=("billing", "billing-lead"))


def action(scope: str = "principal", sensitive: tuple[str, ...] = ()) -> ActionDefinition:
    return definition(
        Recorder(),
        idempotency=IdempotencySpec(key="optional", scope=scope),
        sensitive_fields=sensitive,
    )


def reserved(visibility: str) -> DuplicateScope:
    return DuplicateScope(tenant_id="t", action_id="a", idempotency_key="k", visibility=visibility)


def waiting(decisions: tuple[ApprovalDecision, ...] = (), status: str = "WAITING_APPROVAL") -> Any:
    state = ApprovalState(
        approval_id="ap-1",
        approver_roles=("billing-lead",),
        count=2,
        requested_at=AT,
        expires_at=None,
        decisions=decisions,
    )
    return bare_run(status, approval=state)


def vote(approver: Principal) -> ApprovalDecision:
    return ApprovalDecision(
        approver_id=approver.id, roles=approver.roles, decision=ApprovalVote.APPROVE, at=AT
    )


def agent(principal: Principal = AGENT, tenant: str = "t") -> Reader:
    return Reader(principal, tenant, ReaderKind.AGENT)


def approver(principal: Principal = LEAD, tenant: str = "t") -> Reader:
    return Reader(principal, tenant, ReaderKind.APPROVER)


# ------------------------------------------------------------------------------------- agents


def test_an_agent_reads_the_runs_its_own_principal_proposed() -> None:
    assert may_read(bare_run(), agent(), action())


def test_an_agent_does_not_read_another_principals_run_of_the_same_tenant() -> None:
    run = bare_run(duplicate_scope=reserved("principal:agent-1"))
    assert not may_read(run, agent(OTHER_AGENT), action())


def test_roles_do_not_widen_what_an_agent_reads() -> None:
    assert not may_read(waiting(), agent(AGENT_WITH_LEAD_ROLE), action())


def test_a_resource_scoped_run_is_not_shared_with_the_tenant() -> None:
    run = bare_run(duplicate_scope=reserved("resource:invoice/INV-1"))
    assert not may_read(run, agent(OTHER_AGENT), action("resource"))


def test_a_run_of_a_shareable_action_is_visible_to_every_agent_of_its_tenant() -> None:
    run = bare_run(duplicate_scope=reserved("*"))
    assert may_read(run, agent(OTHER_AGENT), action("tenant"))
    assert not may_read(run, agent(OTHER_AGENT, tenant="other"), action("tenant"))


def test_the_scope_recorded_with_the_run_decides_even_if_the_manifest_changed_later() -> None:
    # Reserved privately, then the action was made shareable: the old run stays private ...
    private = bare_run(duplicate_scope=reserved("principal:agent-1"))
    assert not may_read(private, agent(OTHER_AGENT), action("tenant"))
    # ... and a run reserved tenant-wide stays shared with the tenant that could replay it.
    shared = bare_run(duplicate_scope=reserved("*"))
    assert may_read(shared, agent(OTHER_AGENT), action("principal"))


def test_a_run_that_reserved_nothing_follows_its_actions_manifest() -> None:
    assert may_read(bare_run(), agent(OTHER_AGENT), action("tenant"))
    assert not may_read(bare_run(), agent(OTHER_AGENT), action("principal"))
    assert not may_read(bare_run(), agent(OTHER_AGENT), None)


def test_no_one_reads_across_tenants() -> None:
    assert not may_read(bare_run(), agent(tenant="other"), action())
    assert not may_read(waiting(), approver(tenant="other"), action())


# ---------------------------------------------------------------------------------- approvers


def test_an_approver_reads_runs_waiting_for_a_role_it_holds() -> None:
    assert may_read(waiting(), approver(), action())
    assert not may_read(waiting(), approver(Principal(id="x", roles=("support",))), action())


def test_an_approver_reads_the_runs_it_decided_after_they_finish() -> None:
    done = waiting((vote(LEAD), vote(OTHER_LEAD)), status="SUCCEEDED")
    assert may_read(done, approver(LEAD), action())
    assert may_read(done, approver(OTHER_LEAD), action())
    third = Principal(id="lead-3", roles=("billing-lead",))
    assert not may_read(done, approver(third), action())


def test_an_approver_does_not_read_runs_that_never_needed_approval() -> None:
    assert not may_read(bare_run("SUCCEEDED"), approver(), action("tenant"))


# ----------------------------------------------------------------------------------- sensitive


@pytest.mark.parametrize(
    ("entry", "parsed"),
    [
        ("reason", ("input", ("reason",))),
        ("/input/reason", ("input", ("reason",))),
        ("/output/card/number", ("output", ("card", "number"))),
        ("/output/a~1b/c~0d", ("output", ("a/b", "c~d"))),
    ],
)
def test_sensitive_entries_are_json_pointers_into_input_and_output(
    entry: str, parsed: tuple[str, tuple[str, ...]]
) -> None:
    assert parse_sensitive(entry) == parsed


@pytest.mark.parametrize("entry", ["", "/output", "/secret/x", "/input/a~2"])
def test_a_pointer_outside_input_and_output_is_refused(entry: str) -> None:
    with pytest.raises(PointerError):
        parse_sensitive(entry)


def test_masking_replaces_exactly_the_pointed_values_and_leaves_the_original_alone() -> None:
    document = {"card": {"number": "4111", "brand": "visa"}, "items": [{"iban": "DE1"}, {"x": 1}]}
    masked = mask_document(document, [("card", "number"), ("items", "0", "iban"), ("nope", "x")])
    assert masked == {
        "card": {"number": MASK, "brand": "visa"},
        "items": [{"iban": MASK}, {"x": 1}],
    }
    assert document["card"] == {"number": "4111", "brand": "visa"}


def test_a_masked_run_hides_sensitive_input_and_output_and_its_outcome_too() -> None:
    definition_ = action(sensitive=("reason", "/output/account/iban"))
    output = {"account": {"iban": "DE89370400440532013000", "bank": "X"}}
    run = bare_run(
        "SUCCEEDED",
        input={"invoice_id": "INV-1", "reason": "private"},
        result=ExecutionResult.succeeded(output),
    )
    shown = masked_run(run, definition_)
    assert shown.input == {"invoice_id": "INV-1", "reason": MASK}
    assert shown.result is not None and shown.result.output == {
        "account": {"iban": MASK, "bank": "X"}
    }
    outcome = masked_outcome(outcome_of(run), definition_)
    assert outcome.output == {"account": {"iban": MASK, "bank": "X"}}
    # The stored run (what the executor's context is built from) keeps the real values.
    assert run.input["reason"] == "private"
    assert run.result is not None and run.result.output == output


def test_an_unparseable_sensitive_entry_masks_rather_than_leaks() -> None:
    shown = masked_run(bare_run(input={"/odd": "secret"}), action(sensitive=("/odd",)))
    assert shown.input == {"/odd": MASK}
