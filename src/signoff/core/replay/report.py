"""``ReplayReport``: totals, and per action the decisions that would change, grouped by kind,
stage and the rule that decided, each group with its run ids.

Bounded whatever the history's length: a group keeps its count and its first ``runs_per_change``
runs; the totals are counters. Inputs are shown with the action's ``sensitive`` values masked
(the definitions replayed against, plus any the caller adds); a run of an action those
definitions no longer have shows no input at all (nobody can say what in it is sensitive), nor
does one of an action outside ``inputs_of`` when the caller gives it (the API: the server's own
definitions, so a submitted manifest that drops ``sensitive`` unmasks nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from signoff.core.registry import CompiledAction
from signoff.core.replay.decision import Change, ChangeKind, Decision, Stage
from signoff.core.results import JsonObject
from signoff.core.run import ActionRun
from signoff.core.visibility import mask_document, paths_by_root


def _at(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


@dataclass(slots=True)
class _Group:
    action: str
    kind: ChangeKind
    stage: Stage
    rule: str
    count: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _ActionTotals:
    defined: bool
    replayed: int = 0
    changed: int = 0


class ReplayReport:
    """What a replay found; ``record()`` is the JSON the CLI and the API print."""

    def __init__(
        self,
        *,
        runs_per_change: int = 20,
        sensitive: Mapping[str, Iterable[str]] | None = None,
        inputs_of: Iterable[str] | None = None,
    ) -> None:
        self.runs_per_change = max(0, runs_per_change)
        self._inputs_of = frozenset(inputs_of) if inputs_of is not None else None
        self._sensitive = {k: tuple(v) for k, v in (sensitive or {}).items()}
        self._groups: dict[tuple[str, ChangeKind, Stage, str], _Group] = {}
        self._actions: dict[str, _ActionTotals] = {}
        self.kinds: Counter[ChangeKind] = Counter()
        self.skipped: Counter[str] = Counter()
        self.replayed = 0
        self.changed = 0
        self.first: datetime | None = None
        self.last: datetime | None = None

    # ------------------------------------------------------------ recording
    def replaying(self, run: ActionRun, action: CompiledAction | None) -> None:
        """One more run replayed (its proposal)."""
        self.replayed += 1
        totals = self._actions.setdefault(run.action_id, _ActionTotals(action is not None))
        totals.replayed += 1
        if self.first is None or run.created_at < self.first:
            self.first = run.created_at
        if self.last is None or run.created_at > self.last:
            self.last = run.created_at

    def skip(self, why: str) -> None:
        self.skipped[why] += 1

    def changed_run(self, run: ActionRun) -> None:
        """``run`` has its first change (counted once, whatever its stages found)."""
        self.changed += 1
        self._actions[run.action_id].changed += 1

    def add(
        self,
        run: ActionRun,
        action: CompiledAction | None,
        found: list[Change],
        was: Decision,
        now: Decision,
        shown: JsonObject,
    ) -> None:
        for change in found:
            self.kinds[change.kind] += 1
            key = (run.action_id, change.kind, change.stage, change.rule)
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = _Group(*key)
            group.count += 1
            if len(group.runs) < self.runs_per_change:
                group.runs.append(self._line(run, action, was, now, shown))

    def _line(
        self,
        run: ActionRun,
        action: CompiledAction | None,
        was: Decision,
        now: Decision,
        shown: JsonObject,
    ) -> dict[str, Any]:
        return {
            "run_id": run.run_id,
            "tenant": run.tenant_id,
            "principal": run.principal.id,
            "at": _at(run.created_at),
            "was": was.record(),
            "now": now.record(),
            "input": self._masked(run.action_id, action, shown),
        }

    def _masked(
        self, action_id: str, action: CompiledAction | None, shown: JsonObject
    ) -> JsonObject | None:
        if action is None or (self._inputs_of is not None and action_id not in self._inputs_of):
            return None
        entries = (*action.definition.sensitive_fields, *self._sensitive.get(action_id, ()))
        masked: JsonObject = mask_document(shown, paths_by_root(entries)["input"])
        return masked

    # -------------------------------------------------------------- reading
    @property
    def unchanged(self) -> int:
        return self.replayed - self.changed

    def record(self) -> dict[str, Any]:
        actions = []
        for action_id in sorted(self._actions):
            totals = self._actions[action_id]
            groups = sorted(
                (g for g in self._groups.values() if g.action == action_id),
                key=lambda g: (list(ChangeKind).index(g.kind), g.stage, -g.count, g.rule),
            )
            actions.append(
                {
                    "action": action_id,
                    "defined": totals.defined,
                    "replayed": totals.replayed,
                    "unchanged": totals.replayed - totals.changed,
                    "changed": totals.changed,
                    "changes": [
                        {
                            "kind": str(g.kind),
                            "stage": str(g.stage),
                            "rule": g.rule,
                            "count": g.count,
                            "runs": g.runs,
                            "more": g.count - len(g.runs),
                        }
                        for g in groups
                    ],
                }
            )
        return {
            "totals": {
                "replayed": self.replayed,
                "unchanged": self.unchanged,
                "changed": self.changed,
                "by_kind": {str(k): self.kinds[k] for k in ChangeKind if self.kinds[k]},
                "not_replayed": dict(sorted(self.skipped.items())),
                "first_run_at": _at(self.first),
                "last_run_at": _at(self.last),
            },
            "actions": actions,
        }
