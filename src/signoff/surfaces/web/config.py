"""Settings of the web surface: sessions, callbacks, webhooks. Secrets come from the environment.

Environment (``WebConfig.from_env``)::

    SIGNOFF_SESSION_SECRET    signs inbox session cookies (>= 32 bytes). Unset: a random secret per
                              process, so sessions end when the server restarts (set it when several
                              instances serve the inbox).
    SIGNOFF_CALLBACK_SECRET   server-wide HMAC secret of completion callbacks (an action's own
                              ``executor.callback_secret`` wins).
    SIGNOFF_WEBHOOK_URL       where approval notifications are POSTed (optional).
    SIGNOFF_WEBHOOK_ROUTES    per-action webhook URLs: ``invoice.cancel=https://a,other=https://b``.
    SIGNOFF_WEBHOOK_SECRET    HMAC secret of notification bodies (required with a webhook URL).
    SIGNOFF_SLACK_*           approvals in Slack (see ``signoff.surfaces.web.slack.config``).
    SIGNOFF_OIDC_*            single sign-on for the inbox (see ``signoff.surfaces.web.sso``).
    SIGNOFF_APPROVERS         approvers who get one-time decision links in notifications (JSON).
    SIGNOFF_LINK_TTL_MINUTES  how long a decision link stays valid (default 15).
    SIGNOFF_SHARED_LINK_RECEIVER  ``allow``: let several approvers' links of an action needing two
                              or more approvals reach one receiver (refused at start otherwise).
    SIGNOFF_SECURE_COOKIES    ``1``: mark cookies Secure even on plain HTTP (behind a TLS proxy).
    SIGNOFF_SCOPE_PROPOSE / SIGNOFF_SCOPE_APPROVE   scope names (``signoff.surfaces.access.scopes``).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from signoff.surfaces.web.links import DirectoryEntry
    from signoff.surfaces.web.slack.config import SlackConfig
    from signoff.surfaces.web.sso import OidcConfig

from signoff.surfaces.access.scopes import Scopes

MIN_SECRET_BYTES = 32
DEFAULT_SESSION_TTL = timedelta(hours=8)


class WebConfigError(ValueError):
    """The web surface's settings are missing, too weak or contradictory."""


@dataclass(frozen=True)
class WebhookConfig:
    """``url`` for every action unless ``routes`` names one for the action. ``repr`` hides the secret."""

    secret: str = field(repr=False)
    url: str | None = None
    routes: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 5.0
    attempts: int = 3
    backoff: float = 1.0

    def __post_init__(self) -> None:
        _check_secret(self.secret, "SIGNOFF_WEBHOOK_SECRET")
        if self.url is None and not self.routes:
            raise WebConfigError("a webhook needs SIGNOFF_WEBHOOK_URL or SIGNOFF_WEBHOOK_ROUTES")
        for url in (self.url, *self.routes.values()):
            if url is not None and not url.startswith(("http://", "https://")):
                raise WebConfigError(f"webhook URL must be http(s): {url!r}")
        if self.attempts < 1:
            raise WebConfigError("webhook attempts must be at least 1")

    def url_for(self, action_id: str) -> str | None:
        return self.routes.get(action_id, self.url)


@dataclass(frozen=True)
class WebConfig:
    """``public_url``: where people reach this server (links in notifications). ``repr`` hides
    the secrets."""

    public_url: str = "http://127.0.0.1:8000"
    session_secret: str = field(default_factory=lambda: secrets.token_urlsafe(48), repr=False)
    session_ttl: timedelta = DEFAULT_SESSION_TTL
    secure_cookies: bool = False
    callback_secret: str | None = field(default=None, repr=False)
    webhook: WebhookConfig | None = None
    scopes: Scopes = field(default_factory=Scopes)
    slack: SlackConfig | None = None
    oidc: OidcConfig | None = None
    link_ttl: timedelta = timedelta(minutes=15)
    approvers: Mapping[str, DirectoryEntry] = field(default_factory=dict)
    link_secret: str | None = field(default=None, repr=False)
    """Signs the personal link deliveries to approvers' own webhooks (SIGNOFF_WEBHOOK_SECRET)."""
    shared_link_receiver: bool = False
    """SIGNOFF_SHARED_LINK_RECEIVER=allow: several approvers' links of an action needing two or
    more approvals may reach one receiver (refused at start otherwise)."""

    def __post_init__(self) -> None:
        _check_secret(self.session_secret, "SIGNOFF_SESSION_SECRET")
        if self.callback_secret is not None:
            _check_secret(self.callback_secret, "SIGNOFF_CALLBACK_SECRET")
        if any(e.webhook is not None for e in self.approvers.values()):
            if self.link_secret is None:
                raise WebConfigError(
                    "an approver's own webhook (SIGNOFF_APPROVERS) needs SIGNOFF_WEBHOOK_SECRET "
                    "to sign its deliveries"
                )
            _check_secret(self.link_secret, "SIGNOFF_WEBHOOK_SECRET")
        if any(e.slack is not None for e in self.approvers.values()) and self.slack is None:
            raise WebConfigError(
                "an approver's Slack channel (SIGNOFF_APPROVERS) needs Slack configured "
                "(SIGNOFF_SLACK_BOT_TOKEN, ...)"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, public_url: str) -> WebConfig:
        webhook_secret = env.get("SIGNOFF_WEBHOOK_SECRET") or None
        webhook_url = env.get("SIGNOFF_WEBHOOK_URL") or None
        routes = _routes(env.get("SIGNOFF_WEBHOOK_ROUTES") or "")
        webhook: WebhookConfig | None = None
        if webhook_url is not None or routes:
            if webhook_secret is None:
                raise WebConfigError("a webhook URL needs SIGNOFF_WEBHOOK_SECRET to sign bodies")
            webhook = WebhookConfig(secret=webhook_secret, url=webhook_url, routes=routes)
        from signoff.surfaces.web.links import parse_directory
        from signoff.surfaces.web.slack.config import SlackConfig
        from signoff.surfaces.web.sso import OidcConfig

        ttl_minutes = env.get("SIGNOFF_LINK_TTL_MINUTES") or "15"
        if not ttl_minutes.isdigit() or not 1 <= int(ttl_minutes) <= 24 * 60:
            raise WebConfigError(
                "SIGNOFF_LINK_TTL_MINUTES must be a whole number of minutes, 1-1440"
            )

        return cls(
            public_url=public_url.rstrip("/"),
            session_secret=env.get("SIGNOFF_SESSION_SECRET") or secrets.token_urlsafe(48),
            callback_secret=env.get("SIGNOFF_CALLBACK_SECRET") or None,
            webhook=webhook,
            slack=SlackConfig.from_env(env),
            oidc=OidcConfig.from_env(env),
            link_ttl=timedelta(minutes=int(ttl_minutes)),
            approvers=parse_directory(env.get("SIGNOFF_APPROVERS") or "{}"),
            link_secret=webhook_secret,
            shared_link_receiver=_shared_allowed(env.get("SIGNOFF_SHARED_LINK_RECEIVER") or ""),
            secure_cookies=env.get("SIGNOFF_SECURE_COOKIES", "") in ("1", "true", "yes"),
            scopes=Scopes.from_env(env),
        )


def _shared_allowed(text: str) -> bool:
    if text not in ("", "refuse", "allow"):
        raise WebConfigError("SIGNOFF_SHARED_LINK_RECEIVER must be refuse (the default) or allow")
    return text == "allow"


def _check_secret(secret: str, name: str) -> None:
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise WebConfigError(f"{name} must be at least {MIN_SECRET_BYTES} bytes")


def _routes(text: str) -> dict[str, str]:
    routes: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        action, sep, url = item.partition("=")
        if not sep or not action.strip() or not url.strip():
            raise WebConfigError(f"SIGNOFF_WEBHOOK_ROUTES: expected action=url, got {item!r}")
        routes[action.strip()] = url.strip()
    return routes
