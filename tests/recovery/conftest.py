"""Reuse the store suite's database fixtures (scratch PostgreSQL/MariaDB databases, SQLite files)."""

from tests.store.conftest import (  # noqa: F401 - fixtures are found by name
    mysql_url,
    postgres_url,
    sql_backend,
    tenant,
)
