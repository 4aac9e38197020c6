"""Knowing at once whether a runtime incarnation is alive (contract §2).

Each incarnation records where it runs (host, pid, process start time) and holds a lock that lives
exactly as long as its database session:

- PostgreSQL: a session-level advisory lock (``pg_try_advisory_lock``), seen in ``pg_locks``;
- MySQL/MariaDB: ``GET_LOCK``, seen with ``IS_USED_LOCK``;
- SQLite: an exclusive ``flock`` on a file beside the database (``signoff.db.workers/<id>.lock``).

The lock ends when the process dies, however it dies (the server closes the session; the kernel
drops the flock). Checking never takes the lock, so recoverers checking at once do not disturb
each other or the holder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import psutil
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from signoff.core.ports import Liveness

START_TOLERANCE = 1.0
"""Seconds two readings of one process's start time may differ by (clock-tick rounding)."""


@dataclass(frozen=True, slots=True)
class Incarnation:
    host: str
    pid: int
    started: float

    @classmethod
    def this_process(cls) -> Incarnation:
        return cls(socket.gethostname(), os.getpid(), psutil.Process().create_time())


def process_liveness(host: str | None, pid: int | None, started: float | None) -> Liveness:
    """ALIVE/DEAD for a process on this host; UNKNOWN for another host or nothing recorded."""
    if host != socket.gethostname() or pid is None or started is None:
        return Liveness.UNKNOWN
    try:
        running = psutil.Process(pid)
        same = abs(running.create_time() - started) <= START_TOLERANCE
        alive = same and running.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return Liveness.DEAD
    except psutil.Error:  # e.g. access denied: it exists, we cannot say more
        return Liveness.ALIVE
    return Liveness.ALIVE if alive else Liveness.DEAD


def lock_name(worker_id: str, database: str) -> str:
    """A short, stable lock name for one incarnation in one database."""
    return hashlib.sha256(f"{database}\0{worker_id}".encode()).hexdigest()[:40]


class SessionLock(Protocol):
    name: str

    async def ping(self) -> bool:
        """Still held (the session answers)."""
        ...

    async def release(self) -> None: ...


class _ConnectionLock:
    """A lock held by one dedicated connection for the incarnation's life."""

    def __init__(self, name: str, connection: AsyncConnection, release_sql: str) -> None:
        self.name = name
        self._connection = connection
        self._release_sql = release_sql

    async def ping(self) -> bool:
        try:
            await self._connection.execute(sa.text("SELECT 1"))
            await self._connection.commit()
        except Exception:
            return False
        return True

    async def release(self) -> None:
        with contextlib.suppress(Exception):
            await self._connection.execute(sa.text(self._release_sql), {"name": self.name})
            await self._connection.commit()
        with contextlib.suppress(Exception):
            await self._connection.close()


def _pg_keys(name: str) -> dict[str, int]:
    """Two non-negative int4 keys (classid, objid in ``pg_locks``) from the lock name."""
    return {"k1": int(name[:7], 16), "k2": int(name[7:14], 16)}


_PG_HELD = sa.text(
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND CAST(classid AS bigint) = :k1 AND CAST(objid AS bigint) = :k2"
    " AND objsubid = 2"
)


class _FileLock:
    def __init__(self, name: str, path: Path, handle: int) -> None:
        self.name = name
        self._path = path
        self._handle = handle

    async def ping(self) -> bool:
        return True  # held by this process for as long as the descriptor is open

    async def release(self) -> None:
        with contextlib.suppress(OSError):
            self._path.unlink()
        with contextlib.suppress(OSError):
            os.close(self._handle)


def _lock_dir(engine: AsyncEngine) -> Path | None:
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return Path(f"{database}.workers")


async def acquire(engine: AsyncEngine, name: str) -> SessionLock | None:
    """Take this incarnation's lock; ``None`` when the database offers none (in-memory SQLite)."""
    dialect = engine.dialect.name
    if dialect == "postgresql":
        connection = await engine.connect()
        got = await connection.scalar(
            sa.text("SELECT pg_try_advisory_lock(:k1, :k2)"), _pg_keys(name)
        )
        await connection.commit()  # a session-level lock outlives the transaction
        if not got:
            await connection.close()
            raise RuntimeError(f"could not take the liveness lock {name}")
        return _PgLock(name, connection)
    if dialect in ("mysql", "mariadb"):
        connection = await engine.connect()
        got = await connection.scalar(sa.text("SELECT GET_LOCK(:name, 0)"), {"name": name})
        await connection.commit()
        if got != 1:
            await connection.close()
            raise RuntimeError(f"could not take the liveness lock {name}")
        return _ConnectionLock(name, connection, "SELECT RELEASE_LOCK(:name)")
    directory = _lock_dir(engine)
    if directory is None:
        return None
    directory.mkdir(exist_ok=True)
    path = directory / f"{name}.lock"
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return _FileLock(name, path, handle)


class _PgLock(_ConnectionLock):
    def __init__(self, name: str, connection: AsyncConnection) -> None:
        super().__init__(name, connection, "")

    async def release(self) -> None:
        with contextlib.suppress(Exception):
            await self._connection.execute(
                sa.text("SELECT pg_advisory_unlock(:k1, :k2)"), _pg_keys(self.name)
            )
            await self._connection.commit()
        with contextlib.suppress(Exception):
            await self._connection.close()


async def session_liveness(engine: AsyncEngine, names: dict[str, str]) -> dict[str, Liveness]:
    """For each worker id -> lock name: ALIVE while the lock is held, DEAD once it is free."""
    if not names:
        return {}
    dialect = engine.dialect.name
    found: dict[str, Liveness] = {}
    if dialect == "sqlite":
        directory = _lock_dir(engine)
        for worker_id, name in names.items():
            found[worker_id] = (
                _file_liveness(directory / f"{name}.lock") if directory else Liveness.UNKNOWN
            )
        return found
    async with engine.connect() as connection:
        for worker_id, name in names.items():
            if dialect == "postgresql":
                held = await connection.scalar(_PG_HELD, _pg_keys(name))
                found[worker_id] = Liveness.ALIVE if held else Liveness.DEAD
            else:
                holder = await connection.scalar(
                    sa.text("SELECT IS_USED_LOCK(:name)"), {"name": name}
                )
                found[worker_id] = Liveness.DEAD if holder is None else Liveness.ALIVE
        await connection.rollback()
    return found


def _file_liveness(path: Path) -> Liveness:
    try:
        handle = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return Liveness.DEAD  # released on a clean close, or already found dead
    except OSError:
        return Liveness.UNKNOWN
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return Liveness.ALIVE
    finally:
        os.close(handle)  # closing drops the shared lock this check may have taken
    return Liveness.DEAD
