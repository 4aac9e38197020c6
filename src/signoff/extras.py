"""Optional features and the package extra each needs.

The base install serves stdio and HTTP on SQLite. PostgreSQL, MySQL/MariaDB, Slack approvals,
inbox single sign-on and OpenTelemetry traces each need their own extra (``pip install
'signoff[postgres]'``; ``signoff[all]`` has every one). Configuring a feature whose extra is
missing fails at start: ``require`` raises ``ExtraMissing``, whose message names the extra and the
setting that asked for it, with the stable code ``EXTRA_MISSING``.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType

CODE = "EXTRA_MISSING"

# extra -> the modules it provides (what ``require`` imports to know the extra is there).
EXTRAS = MappingProxyType(
    {
        "postgres": ("asyncpg",),
        "mysql": ("aiomysql",),
        "slack": ("slack_sdk",),
        "sso": ("authlib",),
        "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    }
)


class ExtraMissing(RuntimeError):
    """A configured feature's extra is not installed; ``code`` is ``EXTRA_MISSING``."""

    code = CODE

    def __init__(self, extra: str, feature: str, module: str) -> None:
        self.extra = extra
        self.feature = feature
        self.module = module
        super().__init__(
            f"{feature} needs the {extra!r} extra, which is not installed (no module {module!r}): "
            f"install 'signoff[{extra}]'"
        )


def missing(extra: str) -> str | None:
    """The first module of ``extra`` that cannot be imported, or ``None`` when all can."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def require(extra: str, feature: str) -> None:
    """Raise ``ExtraMissing`` unless ``extra`` is installed; ``feature`` says who asked."""
    module = missing(extra)
    if module is not None:
        raise ExtraMissing(extra, feature, module)
