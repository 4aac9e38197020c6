"""Whether a decision command's run ended as its decider intended (its exit status).

``approvals approve`` means "let it run": the run succeeding, running in the background, waiting
for more approvals or for a serving process to dispatch it is what was meant. ``approvals reject``
means "it must not happen": the run denied (or still waiting for the quorum to reject) is what was
meant. Anything else — an approved run that the guard or the re-checked policy then denied, that
failed or expired — exits ``ENDED_OTHERWISE`` (3) with the run's code, though the decision was
recorded (a decision that was not recorded exits 1, ``plumbing.REFUSED``).
"""

from __future__ import annotations

from signoff.cli.plumbing import fail

ENDED_OTHERWISE = 3
_MEANT = {
    "approve": frozenset({"SUCCEEDED", "ACCEPTED", "PENDING_APPROVAL"}),
    "reject": frozenset({"DENIED", "PENDING_APPROVAL"}),
}


def ended_as_intended(verb: str, status: str) -> bool:
    """Whether an outcome of ``status`` (an ``ExecutionStatus`` value) is what ``verb`` meant."""
    return status in _MEANT[verb]


def exit_unless_intended(verb: str, run_id: str, status: str, code: str) -> None:
    """Exit 3 with the run's code when the decision was recorded but the run ended otherwise."""
    if not ended_as_intended(verb, status):
        fail(
            f"the decision was recorded, but run {run_id} ended {status}, not as {verb}d",
            code,
            ENDED_OTHERWISE,
        )
