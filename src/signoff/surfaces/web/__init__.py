"""The human side of signoff over HTTP: approvals inbox, approvers' JSON API, completion
callbacks and approval notifications (webhook, Slack). Housekeeping is the application's
(``Application.start_housekeeping``), not the web surface's.

Mount it beside ``/mcp``::

    config = WebConfig.from_env(os.environ, public_url=url)
    notifications = WebNotifications(config)
    application = await start_application(settings, notifier=notifications)
    web = build_web(application.runtime, config, verifier, notifications)
    app = build_http_app(runtime, auth, HttpOptions(routes=web.routes, lifespan=web.lifespan))

Routes: ``/approvals`` (inbox, sign-in, sign-out, run pages), ``/api/approvals``,
``/api/runs/{id}`` (+ ``/approve``, ``/reject``), ``/api/callbacks/{run_id}``.
"""

from signoff.surfaces.web.config import WebConfig, WebConfigError, WebhookConfig
from signoff.surfaces.web.surface import WebNotifications, WebSurface, build_routes, build_web
from signoff.surfaces.web.webhook import WebhookNotifier

__all__ = [
    "WebConfig",
    "WebConfigError",
    "WebNotifications",
    "WebSurface",
    "WebhookConfig",
    "WebhookNotifier",
    "build_routes",
    "build_web",
]
