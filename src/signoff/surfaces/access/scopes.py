"""Which surfaces a bearer token may use: the OAuth ``scope`` claim, checked per surface.

An agent's credential (``/mcp``) carries the propose scope; an approver's credential (inbox sign-in,
the approvers' JSON API) carries the approve scope and **not** the propose scope, so no token an
agent can present is ever approval authority. A refusal is 403 ``insufficient_scope`` (RFC 6750
§3.1) naming the scope the surface needs.

Environment (``Scopes.from_env``)::

    SIGNOFF_SCOPE_PROPOSE    the agents' scope (default ``signoff:propose``)
    SIGNOFF_SCOPE_APPROVE    the approvers' scope (default ``signoff:approve``)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

DEFAULT_PROPOSE = "signoff:propose"
DEFAULT_APPROVE = "signoff:approve"
# RFC 6749 §3.3 scope-token: printable ASCII except space, '"' and '\'.
_SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]{1,128}$")


class ScopeConfigError(ValueError):
    """A configured scope name is empty, not a valid scope token, or both names are the same."""


@dataclass(frozen=True, slots=True)
class ScopeRefusal:
    """Why a verified token may not use a surface: the scope it needs, and a sentence for people."""

    scope: str
    description: str

    def challenge(self, resource_metadata: str | None = None) -> str:
        """The ``WWW-Authenticate`` value of this refusal (RFC 6750 §3, RFC 9728 §5.1)."""
        parts = [
            'error="insufficient_scope"',
            f'scope="{self.scope}"',
            f'error_description="{self.description}"',
        ]
        if resource_metadata is not None:
            parts.append(f'resource_metadata="{resource_metadata}"')
        return "Bearer " + ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Scopes:
    """The scope names of the two kinds of credential (settings)."""

    propose: str = DEFAULT_PROPOSE
    approve: str = DEFAULT_APPROVE

    def __post_init__(self) -> None:
        for name, value in (
            ("SIGNOFF_SCOPE_PROPOSE", self.propose),
            ("SIGNOFF_SCOPE_APPROVE", self.approve),
        ):
            if not _SCOPE_TOKEN.match(value):
                raise ScopeConfigError(
                    f"{name} must be one OAuth scope token (printable ASCII, no space, quote "
                    f"or backslash), got {value!r}"
                )
        if self.propose == self.approve:
            raise ScopeConfigError("SIGNOFF_SCOPE_PROPOSE and SIGNOFF_SCOPE_APPROVE must differ")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Scopes:
        return cls(
            propose=env.get("SIGNOFF_SCOPE_PROPOSE") or DEFAULT_PROPOSE,
            approve=env.get("SIGNOFF_SCOPE_APPROVE") or DEFAULT_APPROVE,
        )

    @property
    def supported(self) -> list[str]:
        """For ``scopes_supported`` in the protected-resource metadata."""
        return [self.propose, self.approve]

    def agent_refusal(self, granted: Collection[str]) -> ScopeRefusal | None:
        """``None`` when a token with ``granted`` scopes may call ``/mcp``."""
        if self.propose in granted:
            return None
        return ScopeRefusal(self.propose, f"This endpoint needs a token with scope {self.propose}.")

    def approver_refusal(self, granted: Collection[str]) -> ScopeRefusal | None:
        """``None`` when a token with ``granted`` scopes may decide approvals."""
        if self.propose in granted:
            return ScopeRefusal(
                self.approve,
                f"An agent's token (scope {self.propose}) is never approval authority: "
                f"use a token with scope {self.approve} and without {self.propose}.",
            )
        if self.approve not in granted:
            return ScopeRefusal(self.approve, f"Approving needs a token with scope {self.approve}.")
        return None
