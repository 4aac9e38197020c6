"""What opening or using a store can fail with, for surfaces to turn into one line and an exit.

::

    StoreError
    ├── SchemaOutOfDate      the database needs `signoff db upgrade` before this version can run
    ├── SchemaTooNew         the database was migrated by a newer signoff than this one
    ├── StoreUnavailable     the database cannot be reached
    └── UnsupportedDatabase  a URL this build cannot or will not use
"""

from __future__ import annotations


class StoreError(Exception):
    """Base class; ``code`` is stable, the message is for people."""

    code = "STORE_ERROR"


class SchemaOutOfDate(StoreError):
    code = "DATABASE_SCHEMA_OUT_OF_DATE"

    def __init__(self, current: str | None, head: str) -> None:
        self.current = current
        self.head = head
        at = f"revision {current}" if current else "an empty schema"
        super().__init__(
            f"the database is at {at}, this signoff needs revision {head}: "
            "run `signoff db upgrade --database URL` first"
        )


class SchemaTooNew(StoreError):
    code = "DATABASE_SCHEMA_TOO_NEW"

    def __init__(self, current: str, head: str) -> None:
        self.current = current
        self.head = head
        super().__init__(
            f"the database is at revision {current}, which this signoff (revision {head}) "
            "does not know: it was migrated by a newer signoff"
        )


class StoreUnavailable(StoreError):
    code = "DATABASE_UNAVAILABLE"


class UnsupportedDatabase(StoreError):
    code = "DATABASE_UNSUPPORTED"
