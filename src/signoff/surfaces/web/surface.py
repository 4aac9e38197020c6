"""Assemble the web surface: routes, the notifier, and a lifespan that lets Slack work finish."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from mcp.server.auth.provider import TokenVerifier
from starlette.routing import BaseRoute

from signoff.core.ports import LinkStore, Notifier
from signoff.core.runtime import Runtime
from signoff.surfaces.web.api import ApprovalsApi
from signoff.surfaces.web.auth import Authenticator
from signoff.surfaces.web.callbacks import Callbacks
from signoff.surfaces.web.config import WebConfig
from signoff.surfaces.web.inbox import Inbox, page_templates
from signoff.surfaces.web.links import DecisionLinks
from signoff.surfaces.web.notifiers import combined
from signoff.surfaces.web.receipts import Receipts
from signoff.surfaces.web.replay import ReplayApi, Replaying
from signoff.surfaces.web.session import Sessions
from signoff.surfaces.web.sso import SingleSignOn
from signoff.surfaces.web.webhook import WebhookNotifier

if TYPE_CHECKING:  # slack-sdk is the slack extra: imported only when Slack is configured
    from signoff.surfaces.web.slack.interactions import SlackInteractions

Lifespan = Callable[[Any], AbstractAsyncContextManager[None]]


@dataclass(frozen=True)
class WebSurface:
    routes: list[BaseRoute]
    lifespan: Lifespan
    notifier: Notifier | None
    links: DecisionLinks | None = None


def build_routes(
    runtime: Runtime,
    config: WebConfig,
    verifier: TokenVerifier | None,
    slack: SlackInteractions | None = None,
    links: DecisionLinks | None = None,
    receipts: Receipts | None = None,
    replaying: Replaying | None = None,
) -> list[BaseRoute]:
    """Callbacks always; the inbox and the approvers' API only with a token ``verifier`` (a
    server with a fixed test identity has no approvers), and the operators' replay with it when
    ``replaying`` says what to replay over; Slack's interactions and decision links when
    configured; last, a styled page for any other path under ``/approvals``."""
    routes: list[BaseRoute] = Callbacks(runtime, config.callback_secret).routes()
    if slack is not None:
        routes += slack.routes()
    if links is not None:
        routes += links.routes()
        # With single sign-on, a link decides only for its approver signed in (fail closed: no
        # sessions, no redemption).
        links.require_sign_in = config.oidc is not None
    if verifier is not None:
        auth = Authenticator(verifier, config.scopes)
        sessions = Sessions(
            config.session_secret,
            int(config.session_ttl.total_seconds()),
            secure=config.secure_cookies,
        )
        if links is not None:
            links.sessions = sessions
        routes += ApprovalsApi(runtime, auth, receipts).routes()
        if replaying is not None:
            routes += ReplayApi(auth, replaying).routes()
        inbox = Inbox(runtime, auth, sessions, sso=config.oidc is not None, receipts=receipts)
        routes += inbox.routes()
        if config.oidc is not None:
            routes += SingleSignOn(
                runtime,
                config.oidc,
                sessions,
                public_url=config.public_url,
                key=config.session_secret.encode(),
                render_refusal=inbox.sso_refused,
            ).routes()
        routes.append(inbox.fallback())
    return routes


def decision_links_for(runtime: Runtime, config: WebConfig, store: LinkStore) -> DecisionLinks:
    return DecisionLinks(
        runtime,
        store,
        page_templates(),
        public_url=config.public_url,
        ttl=config.link_ttl,
        directory=config.approvers,
    )


class WebNotifications:
    """The web's approval notifiers (webhook, Slack), built from the runtime they render runs
    with: hand it to ``build_application(notifier=...)``, then to ``build_web`` (Slack's
    interaction routes share its notifier)."""

    def __init__(
        self,
        config: WebConfig,
        *,
        slack_client: Callable[[], httpx.AsyncClient] | None = None,
        links: LinkStore | None = None,
        personal_client: Callable[[], httpx.AsyncClient] | None = None,
    ) -> None:
        self.config = config
        self.slack_client = slack_client
        self.personal_client = personal_client
        self.link_store = links
        self.notifier: Notifier | None = None
        self.slack: SlackInteractions | None = None
        self.links: DecisionLinks | None = None
        self.webhook: WebhookNotifier | None = None

    def use_links(self, runtime: Runtime, store: LinkStore) -> None:
        """Decision links kept in ``store`` (known once the application opened it): they are
        served by the web surface and go out with every webhook notification."""
        self.links = decision_links_for(runtime, self.config, store)
        if self.webhook is not None:
            self.webhook.links = self.links

    def __call__(self, runtime: Runtime) -> Notifier | None:
        config = self.config
        if self.link_store is not None:
            self.links = decision_links_for(runtime, config, self.link_store)
        notifiers: list[Notifier] = []
        slack_api: Any | None = None
        if config.webhook is not None:
            self.webhook = WebhookNotifier(
                runtime, config.webhook, public_url=config.public_url, links=self.links
            )
            notifiers.append(self.webhook)
        if config.slack is not None:
            from signoff.surfaces.web.slack.interactions import SlackInteractions
            from signoff.surfaces.web.slack.messages import SlackApi, SlackNotifier

            api = SlackApi(config.slack, client=self.slack_client)
            slack_api = api
            slack_notifier = SlackNotifier(runtime, api, public_url=config.public_url)
            notifiers.append(slack_notifier)
            self.slack = SlackInteractions(runtime, config.slack, api, slack_notifier)
        if any(entry.personal for entry in config.approvers.values()):
            from signoff.surfaces.web.personal import PersonalLinks

            notifiers.append(
                PersonalLinks(
                    runtime,
                    lambda: self.links,
                    secret=config.link_secret,
                    slack=slack_api,
                    client=self.personal_client,
                )
            )
        self.notifier = combined(notifiers)
        return self.notifier

    def check_receivers(self, runtime: Runtime) -> list[str]:
        """At start: refuse a directory whose approvers' links for an action needing two or more
        approvals would share a receiver (``SHARED_LINK_RECEIVER``), unless allowed; returns
        what was allowed (to log)."""
        from signoff.surfaces.web.links import check_receivers

        webhook = self.config.webhook
        return check_receivers(
            runtime.actions(),
            self.config.approvers,
            webhook.url_for if webhook is not None else (lambda _action: None),
            allowed=self.config.shared_link_receiver,
        )


def build_web(
    runtime: Runtime,
    config: WebConfig,
    verifier: TokenVerifier | None,
    notifications: WebNotifications | None = None,
    *,
    links: LinkStore | None = None,
    receipts: Receipts | None = None,
    replaying: Replaying | None = None,
) -> WebSurface:
    """Routes, plus a lifespan that lets Slack work in flight finish. The notifiers are the
    application's (``notifications``, connected by ``build_application``); so is housekeeping.
    Decision links come with the notifications (they go out in webhooks), or from ``links``.
    Receipts (``docs/receipts.md``) come from ``receipts``; without it the API and the inbox
    answer ``RECEIPT_KEYS_MISSING``."""
    if notifications is None and (config.webhook is not None or config.slack is not None):
        raise ValueError(
            "webhook or Slack configured: pass the WebNotifications given to build_application"
        )
    slack = notifications.slack if notifications is not None else None
    notifier = notifications.notifier if notifications is not None else None
    decision_links = notifications.links if notifications is not None else None
    if decision_links is None and links is not None:
        decision_links = decision_links_for(runtime, config, links)

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if slack is not None:
                await slack.drain()

    routes = build_routes(runtime, config, verifier, slack, decision_links, receipts, replaying)
    return WebSurface(routes, lifespan, notifier, decision_links)
