"""Alembic environment for signoff's own tables; always run programmatically.

``signoff.store.sql.migrate`` hands over a connection that is already inside a transaction (and
holds a migration lock), so Alembic treats the transaction as external and never commits itself.
"""

from __future__ import annotations

from alembic import context

from signoff.store.sql.tables import VERSION_TABLE

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run signoff's migrations with `signoff db upgrade`, not the alembic CLI")

context.configure(connection=connection, version_table=VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
