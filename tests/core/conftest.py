"""The store backends of ``tests/store`` (memory, SQLite, PostgreSQL, MariaDB) for core tests
that must hold on every store."""

from tests.store.conftest import (  # noqa: F401 - fixtures are found by name
    backend,
    mysql_url,
    postgres_url,
    tenant,
)
