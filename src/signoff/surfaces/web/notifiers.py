"""Several notifiers behind the runtime's one ``Notifier`` seam (webhook, Slack, ...).

Each is told in turn; one failing is logged and never keeps the others from hearing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from signoff.core.ports import Notifier
from signoff.core.run import ActionRun

log = logging.getLogger("signoff.notify")


class FanOut:
    def __init__(self, notifiers: Sequence[Notifier]) -> None:
        self.notifiers = tuple(notifiers)

    async def approval_requested(self, run: ActionRun) -> None:
        for notifier in self.notifiers:
            try:
                await notifier.approval_requested(run)
            except Exception:
                log.exception("%s failed on approval_requested", type(notifier).__name__)

    async def approval_decided(self, run: ActionRun, decision: str) -> None:
        for notifier in self.notifiers:
            try:
                await notifier.approval_decided(run, decision)
            except Exception:
                log.exception("%s failed on approval_decided", type(notifier).__name__)


def combined(notifiers: Sequence[Notifier]) -> Notifier | None:
    """``None`` for none, the notifier itself for one, a ``FanOut`` for several."""
    if not notifiers:
        return None
    return notifiers[0] if len(notifiers) == 1 else FanOut(notifiers)
