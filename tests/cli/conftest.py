"""The PostgreSQL scratch database and per-test tenants of ``tests/store`` for CLI tests."""

from tests.store.conftest import (  # noqa: F401 - fixtures are found by name
    postgres_url,
    tenant,
)
