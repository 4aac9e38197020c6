"""The MCP surface: every action a tool, identity from the session, stdio and streamable HTTP.

- ``SignoffMCP(runtime, identify)``: the low-level MCP server (``.server``) over a runtime.
- ``fixed_identity`` / ``bearer_identity``: where a request's caller comes from.
- ``build_http_app``: the Starlette app serving ``/mcp`` (other surfaces mount routes beside it).
- ``serve_stdio``: serve one stdio connection as a fixed principal.
"""

from signoff.surfaces.access.caller import Caller, IdentityError, make_caller
from signoff.surfaces.mcp.identity import bearer_identity, fixed_identity
from signoff.surfaces.mcp.server import SignoffMCP

__all__ = [
    "Caller",
    "IdentityError",
    "SignoffMCP",
    "bearer_identity",
    "fixed_identity",
    "make_caller",
]
