"""A run's statuses, and the one name people read for each.

A run waiting for a decision is stored as ``WAITING_APPROVAL`` (the contract's state machine; the
audit trail's hashed events carry that name, so it is never rewritten), while the outcome an agent
gets says ``PENDING_APPROVAL``. Everything a person reads (CLI tables, ``runs list --status``, the
inbox) shows the outcome's name; the stored name is accepted as an alias wherever a status is given.
This module imports nothing but the standard library, so the command line can offer the choices
without loading the core.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    REQUESTED = "REQUESTED"
    VALIDATING = "VALIDATING"
    POLICY_EVALUATED = "POLICY_EVALUATED"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    RUNNING = "RUNNING"
    WAITING_EXTERNAL = "WAITING_EXTERNAL"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    DENIED = "DENIED"
    CANCELLED = "CANCELLED"
    EXPIRED = "EXPIRED"
    RUNTIME_FAILED = "RUNTIME_FAILED"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.DENIED,
        RunStatus.CANCELLED,
        RunStatus.EXPIRED,
        RunStatus.RUNTIME_FAILED,
    }
)
NON_TERMINAL_STATUSES = frozenset(set(RunStatus) - TERMINAL_STATUSES)

# Where the outcome's vocabulary names the same state differently, people read the outcome's name.
_SHOWN = {RunStatus.WAITING_APPROVAL: "PENDING_APPROVAL"}
_BY_NAME = {
    **{status.value: status for status in RunStatus},
    **{name: status for status, name in _SHOWN.items()},
}


def shown_status(status: RunStatus | str) -> str:
    """The name a person reads for ``status``: ``WAITING_APPROVAL`` reads ``PENDING_APPROVAL``."""
    found = _BY_NAME.get(str(status))
    return _SHOWN.get(found, str(status)) if found is not None else str(status)


def shown_statuses() -> list[str]:
    """Every status by the name people read, in the state machine's order."""
    return [shown_status(status) for status in RunStatus]


def parse_status(name: str) -> RunStatus | None:
    """A status given by a person (any case; shown or stored name), or ``None``."""
    return _BY_NAME.get(name.strip().upper())
