"""A stdio MCP server over programmatic definitions, identity from SIGNOFF_* (a test subprocess).

Run as ``python -m tests.surfaces.stdio_server``; it refuses to start without an identity.
"""

from __future__ import annotations

import asyncio
import os
import sys

from signoff.core.registry import ActionRegistry
from signoff.core.runtime import Runtime
from signoff.store.memory import InMemoryStore
from signoff.surfaces.access.caller import IdentityError, make_caller
from signoff.surfaces.mcp import SignoffMCP, fixed_identity
from signoff.surfaces.mcp.serving import serve_stdio
from tests.helpers import Recorder, definition
from tests.surfaces.support import lookup_definition


def main() -> int:
    try:
        caller = make_caller(
            os.environ.get("SIGNOFF_PRINCIPAL"),
            os.environ.get("SIGNOFF_TENANT"),
            os.environ.get("SIGNOFF_ROLES"),
        )
    except IdentityError as exc:
        print(f"signoff: refusing to start: {exc}", file=sys.stderr)
        return 2
    recorder = Recorder()
    definitions = [definition(recorder), lookup_definition(recorder)]
    if os.environ.get("SIGNOFF_TEST_CONFIRM"):  # the requester-confirmation actions too
        from tests.surfaces.confirming import confirm_definitions

        definitions += confirm_definitions(recorder)
    runtime = Runtime(ActionRegistry(definitions), InMemoryStore())
    asyncio.run(serve_stdio(SignoffMCP(runtime, fixed_identity(caller))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
