"""The invoices tables, their seed data, and the operation log that makes writes idempotent."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from signoff import ExecutionResult

DB_ENV = "SIGNOFF_DEMO_INVOICES_DB"
DEFAULT_DB = "demo-invoices.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS invoices (
    tenant_id TEXT NOT NULL,
    invoice_id TEXT NOT NULL,
    customer TEXT NOT NULL,
    email TEXT NOT NULL,
    amount REAL NOT NULL,
    currency TEXT NOT NULL,
    due_date TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('open', 'paid', 'cancelled')),
    cancel_reason TEXT,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, invoice_id)
);
CREATE TABLE IF NOT EXISTS reminders (
    reminder_id INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL,
    invoice_id TEXT NOT NULL,
    tone TEXT NOT NULL,
    sent_to TEXT NOT NULL,
    sent_at TEXT NOT NULL
);
-- One row per executed operation id: a re-dispatch of the same attempt replays its result.
CREATE TABLE IF NOT EXISTS operations (
    operation_id TEXT PRIMARY KEY,
    action_id TEXT NOT NULL,
    result TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seeded_tenants (tenant_id TEXT PRIMARY KEY);
"""

SEED: tuple[tuple[str, str, str, float, str, str], ...] = (
    ("INV-1001", "Acme Corp", "ap@acme.example", 250.0, "2026-11-15", "open"),
    ("INV-1002", "Globex", "billing@globex.example", 4200.0, "2026-12-01", "open"),
    ("INV-1003", "Initech", "finance@initech.example", 980.0, "2026-10-01", "paid"),
    ("INV-1004", "Umbrella", "ap@umbrella.example", 150000.0, "2026-12-20", "open"),
    ("INV-1005", "Hooli", "ap@hooli.example", 1200.0, "2026-09-30", "cancelled"),
    ("INV-1006", "Stark Industries", "ap@stark.example", 75.5, "2026-10-20", "open"),
)


def database_path() -> str:
    return os.environ.get(DB_ENV, DEFAULT_DB)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@contextmanager
def transaction(tenant_id: str) -> Iterator[sqlite3.Connection]:
    """A write transaction (``BEGIN IMMEDIATE``) with the tenant's sample invoices in place."""
    connection = sqlite3.connect(database_path(), timeout=30, isolation_level=None)
    connection.row_factory = sqlite3.Row
    try:
        connection.executescript(SCHEMA)
        connection.execute("BEGIN IMMEDIATE")
        try:
            _seed(connection, tenant_id)
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
    finally:
        connection.close()


def ensure_seeded(tenant_id: str) -> None:
    """Create the tables and the tenant's sample invoices if they are not there yet."""
    with transaction(tenant_id):
        pass


def _seed(connection: sqlite3.Connection, tenant_id: str) -> None:
    seeded = connection.execute(
        "INSERT OR IGNORE INTO seeded_tenants (tenant_id) VALUES (?)", (tenant_id,)
    )
    if seeded.rowcount == 0:
        return
    connection.executemany(
        "INSERT OR IGNORE INTO invoices (tenant_id, invoice_id, customer, email, amount,"
        " currency, due_date, status, updated_at) VALUES (?, ?, ?, ?, ?, 'EUR', ?, ?, ?)",
        [(tenant_id, *row, now_iso()) for row in SEED],
    )


def invoice(
    connection: sqlite3.Connection, tenant_id: str, invoice_id: str
) -> dict[str, Any] | None:
    row = connection.execute(
        "SELECT invoice_id, customer, email, amount, currency, due_date, status, cancel_reason"
        " FROM invoices WHERE tenant_id = ? AND invoice_id = ?",
        (tenant_id, invoice_id),
    ).fetchone()
    return dict(row) if row is not None else None


def recorded(connection: sqlite3.Connection, operation_id: str) -> ExecutionResult | None:
    """The result an operation already produced, if it ran before (re-dispatch after a crash)."""
    row = connection.execute(
        "SELECT result FROM operations WHERE operation_id = ?", (operation_id,)
    ).fetchone()
    return ExecutionResult.model_validate(json.loads(row["result"])) if row else None


def record(
    connection: sqlite3.Connection, operation_id: str, action_id: str, result: ExecutionResult
) -> ExecutionResult:
    """Store the result in the same transaction as the change it describes."""
    connection.execute(
        "INSERT INTO operations (operation_id, action_id, result, at) VALUES (?, ?, ?, ?)",
        (operation_id, action_id, result.model_dump_json(), now_iso()),
    )
    return result
