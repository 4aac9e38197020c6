"""`signoff serve`'s settings: each from the command line, else the environment, else a default.

``pydantic-settings`` reads ``SIGNOFF_<NAME>`` (``SIGNOFF_PORT=8001``, ``SIGNOFF_LOG_FORMAT=json``);
an option given on the command line wins. docs/operations.md has the full table.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from signoff.cli.choices import Transport as Transport
from signoff.observability.formats import LogFormat
from signoff.surfaces.draining import DEFAULT_GRACE

LogLevel = Literal["debug", "info", "warning", "error", "critical"]


class ServeSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SIGNOFF_", extra="ignore", case_sensitive=False, frozen=True
    )

    transport: Transport = Transport.STDIO
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    log_format: LogFormat = LogFormat.TEXT
    log_level: LogLevel = "info"
    # Seconds a SIGTERM waits for calls in flight before the process exits anyway.
    shutdown_grace: float = Field(default=DEFAULT_GRACE, ge=0, le=3600)
    # Log each governed call's input (off: inputs may hold personal or secret data).
    log_inputs: bool = False
    # Put each governed call's input on its trace span (off, for the same reason).
    trace_payloads: bool = False
    # Seconds /readyz waits for the database before answering 503.
    ready_timeout: float = Field(default=2.0, gt=0, le=60)
    # Seconds between housekeeping ticks (heartbeat, expiry, approved dispatch, sweeps).
    # (15: maintenance.DEFAULT_EVERY, not imported here so that help stays light)
    housekeeping_every: float = Field(default=15.0, gt=0, le=3600)

    @classmethod
    def resolve(cls, **given: Any) -> ServeSettings:
        """Command-line values (``None``: not given) over the environment over the defaults."""
        return cls(**{name: value for name, value in given.items() if value is not None})


def settings_problem(exc: ValidationError) -> str:
    """One line naming the setting and its environment variable."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error.get("loc") else "setting"
    return f"invalid {name} (--{name.replace('_', '-')} or SIGNOFF_{name.upper()}): {error['msg']}"
