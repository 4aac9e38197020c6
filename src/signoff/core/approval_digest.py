"""The approval digest: what exactly an approval approves (contract §10).

SHA-256 (hex) of the RFC 8785 canonical JSON of::

    {"format": "signoff.approval.v1", "action_id", "definition_revision", "input",
     "resource", "principal": {"id", "roles"}, "tenant_id"}

``input`` is the input that will run (the approved input after an amendment). The digest is
computed when approval is requested, recorded with every decision, and recomputed at dispatch:
a run whose definition, input, resource, principal or tenant no longer matches what was approved
is refused (``APPROVAL_DIGEST_MISMATCH``). People see the first 12 hex digits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from signoff.core.chain import canonical_json, chain_safe, sha256_hex

APPROVAL_FORMAT = "signoff.approval.v1"
SHORT = 12


def approval_digest(
    *,
    action_id: str,
    definition_revision: str,
    input: Any,
    resource: str | None,
    principal_id: str,
    principal_roles: Sequence[str],
    tenant_id: str,
) -> str:
    body = {
        "format": APPROVAL_FORMAT,
        "action_id": action_id,
        "definition_revision": definition_revision,
        "input": chain_safe(input),
        "resource": resource,
        "principal": {"id": principal_id, "roles": sorted(principal_roles)},
        "tenant_id": tenant_id,
    }
    return sha256_hex(canonical_json(body))


def short_digest(digest: str | None) -> str:
    """The form shown in the inbox, the API and links."""
    return digest[:SHORT] if digest else ""
