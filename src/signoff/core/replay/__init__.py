"""Policy replay: what would other definitions have decided for the requests already recorded?

``replay(history, registry, scope)`` pages through the audit trail in its order, ``page``
events at a time, loads the runs whose proposals that page holds, and decides each again with
the pipeline's own stages (``engine.py``) against ``registry`` — no executor, no guard, no
preview, and no store: ``History`` (``history.py``) is a read-only port. It compares each
decision with the one recorded (``decision.py``) and returns a ``ReplayReport``
(``report.py``). Memory is bounded by one page, the runs still waiting, the limits' windows
(``window.py``) and the report's groups — not by the history's length.

With ``scope.since``, the replay starts earlier by the longest limit window plus the longest
approval expiry of the definitions (the *warm-up*), so usage at ``since`` is rebuilt from the
runs that could still count; those runs are replayed but not reported.
"""

from __future__ import annotations

from datetime import timedelta

from signoff.core.registry import ActionRegistry
from signoff.core.replay.decision import Change, ChangeKind, Decision, Outcome, Stage
from signoff.core.replay.engine import Replayer, ReplayScope
from signoff.core.replay.history import History, first_seq_at
from signoff.core.replay.report import ReplayReport

__all__ = [
    "Change",
    "ChangeKind",
    "Decision",
    "History",
    "Outcome",
    "ReplayReport",
    "ReplayScope",
    "Stage",
    "replay",
    "warm_up",
]

PAGE = 500
MAX_WARM_UP = timedelta(days=31)


def warm_up(registry: ActionRegistry, action_id: str | None = None) -> timedelta:
    """How far before ``since`` a run may still count: the longest limit window plus the
    longest approval expiry (a run approved late is re-held when it is dispatched)."""
    longest = timedelta(0)
    for action in registry.all():
        if action_id is not None and action.id != action_id:
            continue
        definition = action.definition
        window = max((spec.window for spec in definition.limits), default=timedelta(0))
        if window == timedelta(0):
            continue
        expiry = definition.approval.expires_after or MAX_WARM_UP
        longest = max(longest, window + expiry)
    return min(longest, MAX_WARM_UP)


async def replay(
    history: History,
    registry: ActionRegistry,
    scope: ReplayScope,
    report: ReplayReport | None = None,
    *,
    page: int = PAGE,
) -> ReplayReport:
    """Replay the history in ``scope`` against ``registry``; nothing is written anywhere."""
    found = report if report is not None else ReplayReport()
    replayer = Replayer(registry, scope, found)
    cursor = 0
    if scope.since is not None:
        cursor = await first_seq_at(history, scope.since - warm_up(registry, scope.action_id))
    while True:
        events = await history.events(cursor, page, scope.tenant_id)
        if not events:
            break
        past = scope.until is not None and events[0].at > scope.until
        if past and not replayer.reported_following():
            break  # after the range, only to follow runs proposed in it
        proposed = [e.run_id for e in events if e.kind == "proposed"]
        runs = await history.runs(proposed) if proposed else {}
        for event in events:
            await replayer.on(event, runs)
        last = events[-1].seq
        assert last is not None
        cursor = last
    return found
