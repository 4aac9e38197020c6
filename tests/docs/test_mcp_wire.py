"""docs/mcp.md's tasks exchange is what a real server sends (captured again on every run)."""

from __future__ import annotations

import pytest

from tests.docs.mcp_wire import PAGE, capture
from tests.docs.reference import generated


@pytest.mark.slow
def test_the_documented_tasks_exchange_is_what_the_server_sends() -> None:
    assert generated(PAGE, "tasks-wire") == capture(), "run `make docs-tables`"
