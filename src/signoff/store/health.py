"""Is the store ready to serve? For ``/readyz``: reachable, and its schema at this build's head."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import sqlalchemy.exc

from signoff.core.disclosure import redact
from signoff.core.ports import Store
from signoff.store.errors import StoreError

DEFAULT_TIMEOUT = 2.0
STORE_TIMEOUT = "STORE_TIMEOUT"
STORE_UNREACHABLE = "STORE_UNREACHABLE"


@dataclass(frozen=True, slots=True)
class StoreProblem:
    """Why the store is not ready: ``code`` is stable and safe to show anyone (``/readyz`` is
    unauthenticated); ``detail`` is for the operator's log (driver text, redacted)."""

    code: str
    detail: str


async def store_problem(store: Store, *, timeout: float = DEFAULT_TIMEOUT) -> StoreProblem | None:
    """``None`` when ready, else why.

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
        return StoreProblem(STORE_TIMEOUT, f"the database did not answer within {timeout:g} s")
    except StoreError as exc:
        return StoreProblem(exc.code, redact(str(exc)))
    except (OSError, sqlalchemy.exc.SQLAlchemyError) as exc:
        text = str(getattr(exc, "orig", None) or exc)
        line = text.splitlines()[0] if text else ""
        return StoreProblem(
            STORE_UNREACHABLE, redact(f"{type(exc).__name__}{': ' + line if line else ''}")
        )
    return None
