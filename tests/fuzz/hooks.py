"""Executors of the fuzz manifests: one echoes, one fails the way a real integration leaks."""

from __future__ import annotations

import os
from typing import Any

from signoff import ExecutionContext


def echo(context: ExecutionContext) -> dict[str, Any]:
    return {"keys": sorted(context.input)[:20]}


def explode(context: ExecutionContext) -> dict[str, Any]:
    secret = os.environ.get("FUZZ_SECRET", "unset")
    raise RuntimeError(
        f"connect to postgresql://erp_user:{secret}@db.internal:5432/erp failed; "
        f"[SQL: SELECT * FROM invoices WHERE id = '{context.run_id}'] "
        'File "/srv/erp/client.py", line 12'
    )
