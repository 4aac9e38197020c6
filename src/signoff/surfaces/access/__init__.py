"""Access shared by every surface (MCP over HTTP, the approvers' API, the inbox, the CLI):

- ``caller.py``: ``Caller``, the principal and tenant a request acts as, from verified claims only.
- ``jwt.py``: bearer-token verification (``JwtConfig``, ``JwtVerifier``) and development tokens.
- ``jwks.py``: the identity provider's keys from its JWKS URL or OIDC discovery, cached, bounded.
- ``claims.py``: where a provider puts tenant, roles and scopes (``ClaimNames``).
- ``scopes.py``: which OAuth scopes a route or tool needs, and the refusal when a token lacks them.
"""
