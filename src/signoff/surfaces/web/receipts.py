"""A finished run's receipt for approvers and operators (``docs/receipts.md``): the API's
``GET /api/runs/{id}/receipt`` and the inbox's download link.

The run is read first through ``Runtime.get_run`` with the approver's reader (``core/visibility``):
a run the caller may not read answers exactly like a missing one. Sensitive values are always
masked here (only ``signoff audit receipt --reveal`` on the database reveals them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from signoff.audit.keys import KeyRing, KeyRingError, keys_from_env
from signoff.audit.receipt import ReceiptRefused, make_receipt
from signoff.core.codes import Code
from signoff.core.ports import Store
from signoff.core.run import ActionRun
from signoff.core.runtime import Runtime

KeySource = Callable[[], KeyRing | None]


def keys_from_environment() -> KeyRing | None:
    """The key ring ``SIGNOFF_AUDIT_KEYS`` names, read at each request (as housekeeping does)."""
    return keys_from_env(os.environ)


class Receipts:
    """Makes receipts from ``store``, signed with the key ring ``keys`` gives."""

    def __init__(self, store: Store, keys: KeySource = keys_from_environment) -> None:
        self.store = store
        self.keys = keys

    async def of(self, runtime: Runtime, run: ActionRun) -> dict[str, Any] | ReceiptRefused:
        """``run``'s receipt (already read as visible to the caller), or why there is none."""
        action = runtime.action(run.action_id)
        try:
            keys = self.keys()
        except KeyRingError:
            keys = None
        try:
            return await make_receipt(
                self.store,
                run.run_id,
                keys,
                runtime.now(),
                tenant_id=run.tenant_id,
                definition=action.definition if action is not None else None,
            )
        except ReceiptRefused as refused:
            return refused


def no_receipts() -> ReceiptRefused:
    return ReceiptRefused(Code.RECEIPT_KEYS_MISSING, "This server makes no receipts.")


def download_name(run_id: str) -> str:
    return f"receipt-{run_id}.json"
