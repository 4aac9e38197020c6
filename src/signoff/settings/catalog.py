"""Every setting signoff reads, by group (see ``signoff.settings``)."""

from __future__ import annotations

from signoff.settings.model import Group, Setting

S = Setting
GROUPS: tuple[Group, ...] = (
    Group(
        "Serving (signoff serve)",
        (
            S(
                "SIGNOFF_TRANSPORT",
                "stdio (one local client) or http (streamable HTTP at /mcp)",
                "stdio",
                option="--transport",
            ),
            S("SIGNOFF_HOST", "HTTP: the address to bind", "127.0.0.1", option="--host"),
            S("SIGNOFF_PORT", "HTTP: the port to bind", "8000", option="--port"),
            S(
                "SIGNOFF_PUBLIC_URL",
                "HTTP: the URL clients use to reach this server (token audience, inbox links)",
                "http://HOST:PORT",
                computed=True,
                option="--public-url",
            ),
            S(
                "SIGNOFF_DATABASE_URL",
                "the store: sqlite+aiosqlite:///FILE, postgresql+asyncpg://"
                "... (extra postgres), mysql+aiomysql://... (extra mysql), or memory:// (throwaway)",
                "sqlite+aiosqlite:///signoff.db",
                option="--database",
            ),
            S(
                "SIGNOFF_MANIFESTS",
                "the directory of action manifests (reloaded on change or SIGHUP)",
                "manifests",
                option="--manifests",
            ),
            S(
                "SIGNOFF_INSTANCE_ID",
                "a stable id per deployment slot; one live process per id",
                "the host name and the process id",
                computed=True,
            ),
            S(
                "SIGNOFF_SHUTDOWN_GRACE",
                "HTTP: seconds SIGTERM waits for calls in flight (0-3600)",
                "20",
                option="--shutdown-grace",
            ),
            S(
                "SIGNOFF_READY_TIMEOUT",
                "seconds /readyz waits for the database before answering 503",
                "2",
            ),
        ),
    ),
    Group(
        "Logs and traces",
        (
            S(
                "SIGNOFF_LOG_FORMAT",
                "text (one readable line per event) or json (one object per line), on stderr",
                "text",
                option="--log-format",
            ),
            S(
                "SIGNOFF_LOG_LEVEL",
                "debug, info, warning, error or critical",
                "info",
                option="--log-level",
            ),
            S(
                "SIGNOFF_LOG_INPUTS",
                "log each governed call's input (inputs may hold personal or secret data)",
                "false",
            ),
            S(
                "SIGNOFF_TRACE_PAYLOADS",
                "put each governed call's input on its trace span",
                "false",
            ),
            S(
                "OTEL_TRACES_EXPORTER",
                "otlp or console turns tracing on",
                example="otlp",
                extra="otel",
            ),
            S(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "the OTLP/HTTP collector; setting it turns tracing on",
                example="http://127.0.0.1:4318",
                extra="otel",
            ),
            S(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "the collector's traces URL, if not ENDPOINT/v1/traces",
                example="http://127.0.0.1:4318/v1/traces",
                extra="otel",
            ),
            S("OTEL_SERVICE_NAME", "the service name on every span", "signoff"),
            S(
                "OTEL_RESOURCE_ATTRIBUTES",
                "more resource attributes on every span (key=value,...)",
                example="deployment.environment=production",
            ),
            S("OTEL_SDK_DISABLED", "true turns tracing off whatever else is set", "false"),
        ),
    ),
    Group(
        "Who is calling: stdio identity",
        (
            S(
                "SIGNOFF_PRINCIPAL",
                "stdio (and --fixed-identity): the principal every call acts as",
                example="agent-1",
                option="--principal",
            ),
            S("SIGNOFF_TENANT", "stdio: the tenant", example="acme", option="--tenant"),
            S(
                "SIGNOFF_ROLES",
                "stdio: roles, comma separated",
                example="billing",
                option="--roles",
            ),
        ),
    ),
    Group(
        "Who is calling: bearer tokens (http)",
        (
            S(
                "SIGNOFF_JWT_SECRET",
                "HS256 shared secret (at least 32 bytes); exactly one of the three key settings",
                example="a-long-random-secret",
                secret=True,
            ),
            S(
                "SIGNOFF_JWT_PUBLIC_KEY",
                "path to an RS256 public key (PEM)",
                example="/etc/signoff/jwt.pem",
            ),
            S(
                "SIGNOFF_JWT_JWKS",
                "path to a JWKS file (RS256 keys, chosen by kid)",
                example="/etc/signoff/jwks.json",
            ),
            S(
                "SIGNOFF_JWT_AUDIENCE",
                "the expected aud claim (checked when set)",
                example="https://signoff.example.com",
            ),
            S(
                "SIGNOFF_JWT_ISSUER",
                "the expected iss claim (checked when set; also named as the authorization server)",
                example="https://login.example.com/",
            ),
            S(
                "SIGNOFF_AUTHORIZATION_SERVER",
                "the identity providers the protected-resource metadata names (comma separated)",
                "SIGNOFF_JWT_ISSUER",
                computed=True,
            ),
            S(
                "SIGNOFF_SCOPE_PROPOSE",
                "the scope an agent's token needs for /mcp",
                "signoff:propose",
            ),
            S(
                "SIGNOFF_SCOPE_APPROVE",
                "the scope an approver's token needs for the inbox and /api",
                "signoff:approve",
            ),
            S(
                "SIGNOFF_TASK_SECRET",
                "signs MCP task ids, so any instance answers tasks/get (at least 16 bytes)",
                "SIGNOFF_JWT_SECRET, else random per process",
                computed=True,
                secret=True,
            ),
        ),
    ),
    Group(
        "Fair shares and input limits",
        (
            S("SIGNOFF_MCP_SESSIONS_PER_PRINCIPAL", "MCP sessions one principal may hold", "16"),
            S("SIGNOFF_MCP_MAX_SESSIONS", "MCP sessions in all", "10000"),
            S("SIGNOFF_MCP_SESSION_IDLE_SECONDS", "an idle MCP session ends after (0-1800]", "300"),
            S(
                "SIGNOFF_PENDING_APPROVALS_PER_PRINCIPAL",
                "requests of one principal that may wait for approval",
                "100",
            ),
            S(
                "SIGNOFF_LANE_TENANT_SHARE",
                "the part of the background lane one tenant may hold (0, 1]",
                "0.5",
            ),
            S("SIGNOFF_MAX_INPUT_BYTES", "largest tool arguments accepted, in bytes", "262144"),
            S("SIGNOFF_MAX_INPUT_DEPTH", "deepest nesting of tool arguments accepted", "32"),
        ),
    ),
    Group(
        "Approvers: inbox, links, webhooks",
        (
            S(
                "SIGNOFF_SESSION_SECRET",
                "signs the inbox's cookies (at least 32 bytes); set it "
                "when several instances serve the inbox",
                "random per process",
                computed=True,
                secret=True,
            ),
            S("SIGNOFF_SECURE_COOKIES", "1: mark cookies Secure (behind an HTTPS proxy)", "0"),
            S(
                "SIGNOFF_APPROVERS",
                "approvers who get one-time decision links, as JSON",
                example='{"fin-lead": {"tenant": "acme", "roles": ["billing-lead"]}}',
            ),
            S("SIGNOFF_LINK_TTL_MINUTES", "how long a decision link stays valid (1-1440)", "15"),
            S(
                "SIGNOFF_WEBHOOK_URL",
                "where approval notifications are POSTed",
                example="https://hooks.example.com/signoff",
            ),
            S(
                "SIGNOFF_WEBHOOK_ROUTES",
                "per-action webhook URLs: action=url,action=url",
                example="invoice.cancel=https://hooks.example.com/billing",
            ),
            S(
                "SIGNOFF_WEBHOOK_SECRET",
                "HMAC secret of notification bodies (required with a webhook)",
                example="a-long-random-secret",
                secret=True,
            ),
            S(
                "SIGNOFF_CALLBACK_SECRET",
                "server-wide HMAC secret of completion callbacks (actions may set their own)",
                example="a-long-random-secret",
                secret=True,
            ),
        ),
    ),
    Group(
        "Inbox single sign-on (OpenID Connect; extra sso)",
        (
            S(
                "SIGNOFF_OIDC_ISSUER",
                "the provider's issuer URL (https; http only on loopback); setting it turns SSO on",
                example="https://login.example.com/",
                extra="sso",
            ),
            S(
                "SIGNOFF_OIDC_CLIENT_ID",
                "the inbox's client id at the provider",
                example="signoff-inbox",
                extra="sso",
            ),
            S(
                "SIGNOFF_OIDC_CLIENT_SECRET",
                "the client's secret (unset: a public client, PKCE only)",
                example="client-secret",
                secret=True,
                extra="sso",
            ),
            S(
                "SIGNOFF_OIDC_ROLES_CLAIM",
                "the ID-token claim holding the roles",
                "roles",
                extra="sso",
            ),
            S(
                "SIGNOFF_OIDC_TENANT_CLAIM",
                "the ID-token claim holding the tenant",
                "tenant",
                extra="sso",
            ),
            S(
                "SIGNOFF_OIDC_SCOPES",
                "the scopes requested (must include openid)",
                "openid profile email",
                extra="sso",
            ),
        ),
    ),
    Group(
        "Slack approvals (extra slack)",
        (
            S(
                "SIGNOFF_SLACK_BOT_TOKEN",
                "the bot's token; setting it turns Slack approvals on",
                example="xoxb-...",
                secret=True,
                extra="slack",
            ),
            S(
                "SIGNOFF_SLACK_SIGNING_SECRET",
                "the app's signing secret (verifies button presses)",
                example="slack-signing-secret",
                secret=True,
                extra="slack",
            ),
            S(
                "SIGNOFF_SLACK_CHANNEL",
                "the channel approval requests are posted to",
                example="C0123456789",
                extra="slack",
            ),
            S(
                "SIGNOFF_SLACK_USERS",
                "Slack user ids mapped to approver identities, as JSON",
                example='{"U012AB3CD": {"id": "fin-lead", "tenant": "acme", "roles": '
                '["billing-lead"]}}',
                extra="slack",
            ),
            S(
                "SIGNOFF_SLACK_API_URL",
                "the Slack Web API base URL",
                "https://slack.com/api",
                extra="slack",
            ),
        ),
    ),
    Group(
        "Audit trail",
        (
            S(
                "SIGNOFF_AUDIT_KEYS",
                "the key ring that signs audit checkpoints (a YAML or JSON "
                "file; signoff audit keygen makes one)",
                example="/etc/signoff/audit-keys.yaml",
            ),
        ),
    ),
    Group(
        "Command-line clients (signoff approvals/runs --server)",
        (
            S(
                "SIGNOFF_SERVER",
                "the signoff server the CLI talks to",
                option="--server",
                example="http://127.0.0.1:8000",
            ),
            S(
                "SIGNOFF_TOKEN",
                "the approver's bearer token for --server",
                secret=True,
                option="--token",
                example="eyJ...",
            ),
        ),
    ),
    Group(
        "The demo",
        (
            S(
                "SIGNOFF_DEMO_INVOICES_DB",
                "where the demo invoices live (signoff demo only)",
                "demo-invoices.db",
            ),
        ),
    ),
)
del S
