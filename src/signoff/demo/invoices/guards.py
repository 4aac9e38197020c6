"""Pre-execution guards: checked immediately before dispatch, after any approval wait."""

from __future__ import annotations

from signoff import ExecutionContext, GuardDecision
from signoff.demo.invoices.db import invoice, transaction
from signoff.demo.invoices.executors import AMOUNT_TOLERANCE


def invoice_is_open(context: ExecutionContext) -> GuardDecision:
    """The invoice still exists, is still open, and (when the input names an amount) still has
    that amount — an approval given for 4,200 EUR never cancels an invoice that is now 42,000."""
    invoice_id = context.input["invoice_id"]
    with transaction(context.tenant_id) as connection:
        found = invoice(connection, context.tenant_id, invoice_id)
    if found is None:
        return GuardDecision.deny("INVOICE_NOT_FOUND", f"{invoice_id} does not exist.")
    if found["status"] != "open":
        return GuardDecision.deny("INVOICE_NOT_OPEN", f"{invoice_id} is {found['status']}.")
    shown = context.preview  # what the approvers saw in the preview, if the action has one
    if shown is not None and shown.get("invoice_amount") != found["amount"]:
        return GuardDecision.deny(
            "INVOICE_CHANGED_SINCE_PREVIEW", f"{invoice_id} changed since the approvers saw it."
        )
    amount = context.input.get("amount")
    if amount is not None and abs(found["amount"] - float(amount)) > AMOUNT_TOLERANCE:
        return GuardDecision.deny(
            "INVOICE_AMOUNT_MISMATCH", f"{invoice_id} is not for the amount given."
        )
    return GuardDecision.allow()
