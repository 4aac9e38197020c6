"""A live signoff instance that holds one RUNNING run until it is killed.

``python -m tests.recovery.holder_app DB_URL MANIFESTS``: starts like a server (recovery at start
registers the incarnation: host, pid, start time, liveness lock), proposes ``hold.act``, whose
executor prints ``executing <run_id>`` and then waits forever. The instance id is the default
(``host-pid``), so every start is a different instance, as in production.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from signoff import ActionProposal, Channel, ExecutionContext, Principal, ProposerType

MANIFEST = """\
apiVersion: signoff/v1
kind: Action
metadata: {id: hold.act}
spec:
  effect: write
  risk: low
  approval: {when: false}
  executor:
    python: tests.recovery.holder_app:execute
"""


def write_manifest(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hold.yaml").write_text(MANIFEST, encoding="utf-8")
    return directory


async def execute(context: ExecutionContext) -> dict[str, Any]:
    print("executing", context.run_id, flush=True)
    await asyncio.Event().wait()  # the side effect never finishes: only SIGKILL ends this
    return {}


async def main(url: str, manifests: str) -> None:
    from signoff.app import Settings, start_application

    # No housekeeping loop: its heartbeats would rewrite the worker row (host, pid, lock) at
    # moments the tests cannot predict, undoing the signals a test removes to see each alone.
    # Start-up recovery has registered the incarnation already.
    settings = Settings(database_url=url, manifests_dir=Path(manifests))
    application = await start_application(settings, housekeeping_every=None)
    await application.runtime.propose(
        ActionProposal(
            action_id="hold.act",
            input={},
            principal=Principal(id="agent-1"),
            tenant_id="acme",
            channel=Channel.MCP,
            proposer_type=ProposerType.AGENT,
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
