"""Logging for operators: one JSON object (``--log-format json``) or one readable line per event.

Everything goes through stdlib ``logging`` to stderr (stdout carries the MCP protocol on stdio).
signoff's own events carry their facts as fields (``extra=``), never inside the message text, so
a log pipeline can index them: ``run_id``, ``tenant``, ``action``, ``principal``, ``status``,
``code``, ``retry``, ``duration_ms``… Inputs and outputs are never logged unless the operator asks
(``SIGNOFF_LOG_INPUTS``). uvicorn's loggers are routed through the same handler.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from pythonjsonlogger.json import JsonFormatter

from signoff.observability.formats import LogFormat as LogFormat

LEVELS = ("debug", "info", "warning", "error", "critical")
# Attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_QUIET_FIELDS = _STANDARD | {"color_message"}
_UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")
# Chatty at INFO about their own internals (alembic: one line per migration plugin).
_LIBRARIES_AT_WARNING = ("alembic",)


class TextFormatter(logging.Formatter):
    """``2026-12-01T17:45:00.123Z INFO signoff.calls governed call run_id=… code=SUCCEEDED``"""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        line = (
            f"{stamp.replace('+00:00', 'Z')} {record.levelname} {record.name} {record.getMessage()}"
        )
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        if fields:
            line += " " + " ".join(f"{k}={_text(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value if value and " " not in value and '"' not in value else json.dumps(value)
    return json.dumps(value, default=str, separators=(",", ":"))


def _timestamp(record: logging.LogRecord) -> str:
    stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class _Json(JsonFormatter):
    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = _timestamp(record)
        super().add_fields(log_data, record, message_dict)
        log_data.pop("color_message", None)  # uvicorn's ANSI-coloured copy of the message


def json_formatter() -> logging.Formatter:
    """``{"time": "…Z", "level": "INFO", "logger": "signoff.calls", "message": "…", <fields>}``"""
    return _Json(
        "{levelname}{name}{message}",
        style="{",
        rename_fields={"levelname": "level", "name": "logger"},
        json_default=str,
        json_ensure_ascii=False,
    )


def configure_logging(
    log_format: LogFormat | str = LogFormat.TEXT,
    level: str = "info",
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send every logger (signoff's, uvicorn's, the SDK's) to ``stream`` (stderr) in one format."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(
        json_formatter() if LogFormat(log_format) is LogFormat.JSON else TextFormatter()
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _UVICORN:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    for name in _LIBRARIES_AT_WARNING:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
    return handler
