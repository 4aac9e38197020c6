from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.web.support import Site, site_for_tests


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with site_for_tests() as built:
        yield built
