"""Approvers read business, not code: why approval is needed in a sentence (the manifest's own or
one derived from the rule, values as the action displays them), previews formatted and masked
like the input, digests behind a disclosure, a preview after the decision labelled as taken at
proposal time."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.core.definition import (
    ApprovalSpec,
    DisplayFormat,
    Escalation,
    FieldDisplay,
    PolicySpec,
)
from signoff.manifest.explain import rule_in_words
from signoff.surfaces.web.slack.messages import request_blocks
from tests.helpers import Recorder, approve, definition
from tests.web.support import SENSITIVE_SCHEMA, site_for_tests, token
from tests.web.test_inbox import LEAD, sign_in

MONEY = {"amount": FieldDisplay(format=DisplayFormat.MONEY, currency="EUR")}


def refund_preview(context: Any) -> dict[str, Any]:
    return {"refund": context.input["amount"], "reason": context.input.get("reason", "")}


def refund(approval: ApprovalSpec, **extra: Any) -> Any:
    return definition(
        Recorder(),
        id="refund.send",
        input_schema=SENSITIVE_SCHEMA,
        sensitive_fields=("reason",),
        display=MONEY,
        approval=approval,
        policy=PolicySpec(roles=("billing",)),
        preview=refund_preview,
        **{"preview_display": {"refund": FieldDisplay(format=DisplayFormat.MONEY, currency="EUR")}}
        | extra,
    )


DERIVED = ApprovalSpec(
    when="input.amount > 1000.0 && input.invoice_id != 'INV-0'",
    approver_roles=("billing-lead",),
    escalate=(Escalation(when="input.amount >= 10000.0", count=2),),
)
WRITTEN = ApprovalSpec(
    when="input.amount > 1000.0",
    explain="Refunds over 1,000 EUR need a finance lead.",
    approver_roles=("billing-lead",),
)
INPUT = {"invoice_id": "INV-9", "amount": 12500, "reason": "Jane Doe called"}


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ("input.amount > 1000.0", "amount is more than 1,000"),
        ("1000 < input.amount", "amount is more than 1,000"),
        ('input.a >= 2 || input.c != "x"', 'a is at least 2 or c is not "x"'),
        ('input.a > 1 && input.b == "x" || input.c < 3', "a rule on a, b and c matched"),
        ('has(input.prio) && input.prio == "high"', "a rule on prio matched"),
        ("input.items.size() > 3", "a rule on items matched"),
        ('proposer.type == "agent"', "the action's approval rule matched"),
        ("input.amount > ", "the action's approval rule matched"),
    ],
)
def test_a_rule_reads_as_words_never_as_cel(rule: str, words: str) -> None:
    assert rule_in_words(rule) == words


async def test_the_inbox_link_and_slack_say_why_in_words_with_display_formats() -> None:
    async with site_for_tests(extra=[refund(DERIVED)]) as site:
        pending = await site.propose(INPUT, action="refund.send")
        run = await site.runtime.get_run(pending.run_id, "acme")
        assert run is not None
        async with site.client() as http:
            await sign_in(http, token(**LEAD))
            page = await http.get(f"/approvals/runs/{pending.run_id}")
        why = page.text.split('id="why"')[1].split("</div>")[0]
        assert "Amount is more than 1,000.00 EUR and invoice_id is not" in why
        assert "More approvers because amount is at least 10,000.00 EUR." in why
        assert "2 approvals from billing-lead" in why
        assert "input." not in why and "&amp;&amp;" not in why
        slack = str(request_blocks(site.runtime, run, "http://127.0.0.1:8000"))
        assert "Amount is more than 1,000.00 EUR" in slack and "input.amount" not in slack


async def test_the_manifests_own_sentence_is_shown_instead_of_a_derived_one() -> None:
    async with site_for_tests(extra=[refund(WRITTEN)]) as site:
        pending = await site.propose(INPUT, action="refund.send")
        async with site.client() as http:
            await sign_in(http, token(**LEAD))
            page = await http.get(f"/approvals/runs/{pending.run_id}")
        why = page.text.split('id="why"')[1].split("</div>")[0]
        assert "Refunds over 1,000 EUR need a finance lead. It needs 1 approval from" in why
        assert "more than" not in why


async def test_a_preview_is_formatted_like_the_input_and_masks_what_the_input_masks() -> None:
    async with site_for_tests(extra=[refund(WRITTEN)]) as site:
        pending = await site.propose(INPUT, action="refund.send")
        async with site.client() as http:
            await sign_in(http, token(**LEAD))
            page = await http.get(f"/approvals/runs/{pending.run_id}")
        preview = page.text.split('id="preview"')[1].split("</div>")[0]
        assert "<dt>refund</dt><dd>12,500.00 EUR</dd>" in preview
        assert "Jane Doe" not in page.text  # the sensitive reason, echoed by the dry run
        assert "taken when the run was proposed" in page.text


async def test_digests_sit_behind_a_disclosure_with_a_sentence_saying_what_they_are() -> None:
    async with site_for_tests(extra=[refund(WRITTEN)]) as site:
        pending = await site.propose(INPUT, action="refund.send")
        async with site.client() as http:
            await sign_in(http, token(**LEAD))
            page = await http.get(f"/approvals/runs/{pending.run_id}")
        summary = page.text.split('<dl class="summary">')[1].split("</dl>")[0]
        assert "digest" not in summary.lower()
        details = page.text.split('<details class="digests" id="digests">')[1].split("</details>")[
            0
        ]
        assert "fingerprint" in details and "<code>" in details


async def test_a_preview_after_the_decision_says_it_was_taken_at_proposal_time() -> None:
    async with site_for_tests(extra=[refund(WRITTEN)]) as site:
        pending = await site.propose(INPUT, action="refund.send")
        await site.runtime.decide(pending.run_id, "acme", approve())
        async with site.client() as http:
            await sign_in(http, token(**LEAD))
            page = await http.get(f"/approvals/runs/{pending.run_id}")
        when = page.text.split('id="preview-when"')[1].split("</span>")[0]
        assert "before the decision" in when and "does not describe the result" in when


def test_rewording_a_sentence_or_a_preview_format_is_not_a_new_revision() -> None:
    plain = refund(ApprovalSpec(when="input.amount > 1000.0", approver_roles=("billing-lead",)))
    worded = refund(WRITTEN, preview_display={})
    tiered = refund(DERIVED)
    reworded = refund(
        DERIVED.model_copy(
            update={
                "escalate": (Escalation(when="input.amount >= 10000.0", count=2, explain="Big."),)
            }
        )
    )
    assert plain.revision() == worded.revision()
    assert tiered.revision() == reworded.revision()
    assert plain.revision() != tiered.revision()  # the rule itself is governed
