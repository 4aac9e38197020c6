"""Slack settings: the bot token, the signing secret, the channel, and who each Slack user is."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from signoff.core.identity import Principal
from signoff.extras import require
from signoff.surfaces.web.config import WebConfigError


class SlackConfigError(WebConfigError):
    """The Slack settings are incomplete or malformed."""


@dataclass(frozen=True, slots=True)
class SlackApprover:
    """The signoff identity a Slack user decides as."""

    principal_id: str
    tenant_id: str
    roles: tuple[str, ...]

    @property
    def principal(self) -> Principal:
        return Principal(id=self.principal_id, roles=self.roles)


@dataclass(frozen=True)
class SlackConfig:
    """``repr`` hides the bot token and the signing secret."""

    bot_token: str = field(repr=False)
    signing_secret: str = field(repr=False)
    channel: str
    users: Mapping[str, SlackApprover] = field(default_factory=dict)
    api_url: str = "https://slack.com/api"
    timeout: float = 5.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SlackConfig | None:
        """``None`` when Slack is not configured (no ``SIGNOFF_SLACK_BOT_TOKEN``)."""
        token = env.get("SIGNOFF_SLACK_BOT_TOKEN") or None
        if token is None:
            return None
        secret = env.get("SIGNOFF_SLACK_SIGNING_SECRET") or ""
        channel = env.get("SIGNOFF_SLACK_CHANNEL") or ""
        if not secret or not channel:
            raise SlackConfigError(
                "Slack needs SIGNOFF_SLACK_SIGNING_SECRET and SIGNOFF_SLACK_CHANNEL with the bot token"
            )
        require("slack", "Slack approvals (SIGNOFF_SLACK_BOT_TOKEN)")
        return cls(
            bot_token=token,
            signing_secret=secret,
            channel=channel,
            users=parse_users(env.get("SIGNOFF_SLACK_USERS") or "{}"),
            api_url=env.get("SIGNOFF_SLACK_API_URL") or "https://slack.com/api",
        )


def parse_users(text: str) -> dict[str, SlackApprover]:
    """``{"U123": {"id": "fin-lead", "tenant": "acme", "roles": ["billing-lead"]}, ...}``."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise SlackConfigError("SIGNOFF_SLACK_USERS is not JSON") from exc
    if not isinstance(raw, dict):
        raise SlackConfigError("SIGNOFF_SLACK_USERS must be a JSON object keyed by Slack user id")
    users: dict[str, SlackApprover] = {}
    for user_id, entry in raw.items():
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("id"), str)
            and entry["id"]
            and isinstance(entry.get("tenant"), str)
            and entry["tenant"]
            and isinstance(entry.get("roles"), list)
            and all(isinstance(role, str) and role for role in entry["roles"])
        )
        if not ok:
            raise SlackConfigError(
                f"SIGNOFF_SLACK_USERS[{user_id!r}] needs id, tenant and roles (a list of strings)"
            )
        users[user_id] = SlackApprover(entry["id"], entry["tenant"], tuple(entry["roles"]))
    return users
