"""Access shared by every surface (MCP over HTTP, the approvers' API, the inbox, the CLI):

- ``caller.py``: ``Caller``, the principal and tenant a request acts as, from verified claims only.
- ``jwt.py``: bearer-token verification (``JwtConfig``, ``JwtVerifier``) and development tokens.
- ``scopes.py``: which OAuth scopes a route or tool needs, and the refusal when a token lacks them.
"""
