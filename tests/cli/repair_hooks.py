"""An idempotent executor for the CLI repair test: possibly applied on its first call (per
calls file), fine afterwards; every call's operation id is appended to the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from signoff import ExecutionContext, ExecutionResult

CALLS_ENV = "SIGNOFF_TEST_REPAIR_CALLS"

MANIFEST = """\
apiVersion: signoff/v1
kind: Action
metadata: {id: erp.sync}
spec:
  effect: write
  risk: low
  approval: {when: false, approvers: {roles: [billing-lead]}}
  executor:
    python: tests.cli.repair_hooks:sync
    idempotent: IDEMPOTENT
  results:
    ERP_TIMEOUT: {status: FAILED, retry: MANUAL_REVIEW}
"""


def sync(context: ExecutionContext) -> ExecutionResult | dict[str, Any]:
    calls = Path(os.environ[CALLS_ENV])
    before = calls.read_text().splitlines() if calls.exists() else []
    with calls.open("a") as out:
        out.write(context.operation_id + "\n")
    if not before:
        return ExecutionResult.possibly_applied_failure("ERP_TIMEOUT", "no answer in time")
    return {"synced": True}
