"""Short run ids: the random tail of a run id, shown and accepted the way git shows hashes.

A run id is a UUIDv7 string (``0193a7e4-5b1c-7d2e-9f3a-4b5c6d7e8f90``). Its start is a
millisecond clock, so runs minutes apart share their first eight characters; its last group is
12 random hex characters. People see that tail (``4b5c6d7e8f90``) and may type it, or any start of
it of at least ``MIN_CHARS`` characters, wherever a run id is asked for; the whole id always works.
A short id is resolved only among the runs the asker may read, so it never tells whether someone
else's run exists; several matches answer ``RUN_ID_AMBIGUOUS`` naming the readable ones.
"""

from __future__ import annotations

import re

SHORT_CHARS = 12
MIN_CHARS = 6
# Where the tail starts in a canonical 36-character id (0-based).
TAIL_START = 24
RUN_ID_AMBIGUOUS = "RUN_ID_AMBIGUOUS"
_TAIL = re.compile(rf"^[0-9a-f]{{{MIN_CHARS},{SHORT_CHARS}}}$")


def short_id(run_id: str) -> str:
    """The tail people read: the id's last 12 characters."""
    return run_id[-SHORT_CHARS:]


def tail_start(given: str) -> str | None:
    """``given`` as the start of a run id's tail (lower case), or ``None`` when it cannot be one
    (then it can only be a whole id)."""
    wanted = given.strip().lower()
    return wanted if _TAIL.match(wanted) else None


def has_tail(run_id: str, start: str) -> bool:
    """Whether ``run_id``'s tail begins with ``start``."""
    return len(run_id) == TAIL_START + SHORT_CHARS and run_id.startswith(start, TAIL_START)
