"""Executors of the demo invoice actions. Writes are idempotent by operation id: the result is
recorded in the same transaction as the change, so a re-dispatch of the same attempt replays it."""

from __future__ import annotations

from typing import Any

from signoff import ExecutionContext, ExecutionResult
from signoff.demo.invoices.db import invoice, now_iso, record, recorded, transaction

AMOUNT_TOLERANCE = 0.005


def list_invoices(context: ExecutionContext) -> dict[str, Any]:
    """Invoices of the caller's tenant, optionally by status, oldest due date first."""
    status = context.input.get("status")
    limit = int(context.input.get("limit", 20))
    with transaction(context.tenant_id) as connection:
        rows = connection.execute(
            "SELECT invoice_id, customer, amount, currency, due_date, status FROM invoices"
            " WHERE tenant_id = ? AND (? IS NULL OR status = ?)"
            " ORDER BY due_date, invoice_id LIMIT ?",
            (context.tenant_id, status, status, limit),
        ).fetchall()
    invoices = [dict(row) for row in rows]
    return {"invoices": invoices, "count": len(invoices)}


def get_invoice(context: ExecutionContext) -> dict[str, Any] | ExecutionResult:
    with transaction(context.tenant_id) as connection:
        found = invoice(connection, context.tenant_id, context.input["invoice_id"])
    if found is None:
        return ExecutionResult.correctable_failure("INVOICE_NOT_FOUND", "No such invoice.")
    return {"invoice": found}


def preview_cancel(context: ExecutionContext) -> dict[str, Any] | ExecutionResult:
    """The dry run approvers see before deciding: the invoice as it stands now."""
    with transaction(context.tenant_id) as connection:
        found = invoice(connection, context.tenant_id, context.input["invoice_id"])
    if found is None:
        return ExecutionResult.correctable_failure("INVOICE_NOT_FOUND", "No such invoice.")
    return {
        "customer": found["customer"],
        "invoice_amount": found["amount"],
        "currency": found["currency"],
        "due_date": found["due_date"],
        "status": found["status"],
    }


def cancel_invoice(context: ExecutionContext) -> ExecutionResult:
    """Cancel an open invoice whose amount matches what was approved."""
    invoice_id = context.input["invoice_id"]
    with transaction(context.tenant_id) as connection:
        previous = recorded(connection, context.operation_id)
        if previous is not None:
            return previous
        found = invoice(connection, context.tenant_id, invoice_id)
        if found is None:
            result = ExecutionResult.correctable_failure("INVOICE_NOT_FOUND", "No such invoice.")
        elif found["status"] == "paid":
            result = ExecutionResult.permanent_failure(
                "INVOICE_ALREADY_PAID", f"{invoice_id} is paid; issue a credit note instead."
            )
        elif found["status"] == "cancelled":
            result = ExecutionResult.permanent_failure(
                "INVOICE_ALREADY_CANCELLED", f"{invoice_id} was already cancelled."
            )
        elif abs(found["amount"] - float(context.input["amount"])) > AMOUNT_TOLERANCE:
            result = ExecutionResult.correctable_failure(
                "INVOICE_AMOUNT_MISMATCH",
                f"{invoice_id} is for {found['amount']:.2f} {found['currency']}, not the amount given.",
            )
        else:
            reason = context.input.get("reason", "")
            connection.execute(
                "UPDATE invoices SET status = 'cancelled', cancel_reason = ?, updated_at = ?"
                " WHERE tenant_id = ? AND invoice_id = ? AND status = 'open'",
                (reason, now_iso(), context.tenant_id, invoice_id),
            )
            result = ExecutionResult.succeeded(
                {
                    "invoice_id": invoice_id,
                    "status": "cancelled",
                    "amount": found["amount"],
                    "currency": found["currency"],
                }
            )
        return record(connection, context.operation_id, context.action_id, result)


def send_reminder(context: ExecutionContext) -> ExecutionResult:
    """Record (our stand-in for sending) a payment reminder for an open invoice."""
    invoice_id = context.input["invoice_id"]
    tone = context.input.get("tone", "friendly")
    with transaction(context.tenant_id) as connection:
        previous = recorded(connection, context.operation_id)
        if previous is not None:
            return previous
        found = invoice(connection, context.tenant_id, invoice_id)
        if found is None or found["status"] != "open":
            result = ExecutionResult.permanent_failure(
                "INVOICE_NOT_OPEN", f"{invoice_id} is not an open invoice."
            )
        else:
            sent_at = now_iso()
            cursor = connection.execute(
                "INSERT INTO reminders (tenant_id, invoice_id, tone, sent_to, sent_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (context.tenant_id, invoice_id, tone, found["email"], sent_at),
            )
            result = ExecutionResult.succeeded(
                {
                    "reminder_id": cursor.lastrowid,
                    "invoice_id": invoice_id,
                    "tone": tone,
                    "sent_to": found["email"],
                    "sent_at": sent_at,
                }
            )
        return record(connection, context.operation_id, context.action_id, result)
