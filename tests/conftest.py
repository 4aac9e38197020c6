"""Shared fixtures. Database URLs come from SIGNOFF_TEST_POSTGRES_URL / SIGNOFF_TEST_MYSQL_URL."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The test helpers (tests.*) import from the repository root.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------ leaked SQLite connections
# See tests/leaks.py: a test that leaves an aiosqlite connection open fails at its own end.
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from tests.leaks import leaked_since, open_connections  # noqa: E402


@pytest.fixture(autouse=True)
def _no_leaked_sqlite_connections() -> Iterator[None]:
    before = open_connections()
    yield
    leaked = leaked_since(before)
    if leaked:
        pytest.fail(
            f"this test left {len(leaked)} SQLite connection(s) open (close the store or "
            f"dispose the engine); the first was opened at:\n{leaked[0]}",
            pytrace=False,
        )
