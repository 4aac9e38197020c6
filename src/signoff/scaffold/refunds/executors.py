"""The executor of ``refund.issue``. It stands in for your payment provider: it appends each
refund to ``refunds.jsonl`` (or ``$REFUNDS_LEDGER``) - replace the body with the real call.

It is idempotent by ``context.operation_id``, as the manifest declares (``idempotent: true``):
signoff may call it again with the same operation id after a crash, and the refund is then
answered from the ledger instead of being issued twice. Pass the operation id to your provider
as its idempotency key and the real call gets the same guarantee.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from signoff import ExecutionContext


def ledger() -> Path:
    return Path(os.environ.get("REFUNDS_LEDGER", "refunds.jsonl"))


def issue_refund(context: ExecutionContext) -> dict[str, Any]:
    """Issue the refund once per operation id and answer what was issued."""
    path = ledger()
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry["operation_id"] == context.operation_id:
                return dict(entry["refund"])
    digest = hashlib.sha256(context.operation_id.encode()).hexdigest()
    refund = {
        "refund_id": f"RF-{digest[:10].upper()}",
        "order_id": context.input["order_id"],
        "amount": context.input["amount"],
        "currency": "EUR",
        "status": "issued",
    }
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"operation_id": context.operation_id, "refund": refund}) + "\n")
    return refund
