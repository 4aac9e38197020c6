"""Which surfaces a bearer token may use: the OAuth ``scope`` claim, checked per surface.

An agent's credential (``/mcp``) carries the propose scope; an approver's credential (inbox sign-in,
the approvers' JSON API) carries the approve scope and **not** the propose scope, so no token an
agent can present is ever approval authority. A refusal is 403 ``insufficient_scope`` (RFC 6750
§3.1) naming the scope the surface needs.

Environment (``Scopes.from_env``)::

    SIGNOFF_SCOPE_PROPOSE    the agents' scope (default ``signoff:propose``)
    SIGNOFF_SCOPE_APPROVE    the approvers' scope (default ``signoff:approve``)
    SIGNOFF_SCOPE_OPERATE    the operators' scope (default ``signoff:operate``): policy replay

An operator's credential carries the operate scope and not the propose scope; approving and
operating are separate grants (a token may hold both).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

DEFAULT_PROPOSE = "signoff:propose"
DEFAULT_APPROVE = "signoff:approve"
DEFAULT_OPERATE = "signoff:operate"
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
    operate: str = DEFAULT_OPERATE

    def __post_init__(self) -> None:
        for name, value in (
            ("SIGNOFF_SCOPE_PROPOSE", self.propose),
            ("SIGNOFF_SCOPE_APPROVE", self.approve),
            ("SIGNOFF_SCOPE_OPERATE", self.operate),
        ):
            if not _SCOPE_TOKEN.match(value):
                raise ScopeConfigError(
                    f"{name} must be one OAuth scope token (printable ASCII, no space, quote "
                    f"or backslash), got {value!r}"
                )
        if self.propose == self.approve:
            raise ScopeConfigError("SIGNOFF_SCOPE_PROPOSE and SIGNOFF_SCOPE_APPROVE must differ")
        if self.operate in (self.propose, self.approve):
            raise ScopeConfigError(
                "SIGNOFF_SCOPE_OPERATE must differ from SIGNOFF_SCOPE_PROPOSE and "
                "SIGNOFF_SCOPE_APPROVE"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Scopes:
        return cls(
            propose=env.get("SIGNOFF_SCOPE_PROPOSE") or DEFAULT_PROPOSE,
            approve=env.get("SIGNOFF_SCOPE_APPROVE") or DEFAULT_APPROVE,
            operate=env.get("SIGNOFF_SCOPE_OPERATE") or DEFAULT_OPERATE,
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

    def operator_refusal(self, granted: Collection[str]) -> ScopeRefusal | None:
        """``None`` when a token with ``granted`` scopes may use the operators' endpoints."""
        if self.propose in granted:
            return ScopeRefusal(
                self.operate,
                f"An agent's token (scope {self.propose}) is never operator authority: "
                f"use a token with scope {self.operate} and without {self.propose}.",
            )
        if self.operate not in granted:
            return ScopeRefusal(
                self.operate, f"This endpoint is for operators: a token with scope {self.operate}."
            )
        return None
