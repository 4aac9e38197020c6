"""Is the store ready to serve? For ``/readyz``: reachable, and its schema at this build's head."""

from __future__ import annotations

import asyncio

import sqlalchemy.exc

from signoff.core.ports import Store
from signoff.store.errors import StoreError

DEFAULT_TIMEOUT = 2.0


async def store_problem(store: Store, *, timeout: float = DEFAULT_TIMEOUT) -> str | None:
    """``None`` when ready, else one line saying why (never credentials or a traceback).

    SQL stores: one round trip that reads the schema revision and compares it with the
    shipped migrations' head, bounded by ``timeout``. The memory store is always ready.
    """
    from signoff.store.sql import SqlStore
    from signoff.store.sql.migrate import check_schema

    if not isinstance(store, SqlStore):
        return None
    try:
        async with asyncio.timeout(timeout):
            await check_schema(store.engine)
    except TimeoutError:
        return f"the database did not answer within {timeout:g} s"
    except StoreError as exc:
        return f"{exc.code}: {exc}"
    except (OSError, sqlalchemy.exc.SQLAlchemyError) as exc:
        detail = str(getattr(exc, "orig", None) or exc).splitlines()[0] if str(exc) else ""
        return (
            f"the database is unreachable ({type(exc).__name__}{': ' + detail if detail else ''})"
        )
    return None
