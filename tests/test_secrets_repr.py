"""Secrets never show in ``repr`` (and so never in a log line or a traceback's locals)."""

from __future__ import annotations

from typing import Any

import pytest

from signoff.core.definition import ActionDefinition
from signoff.surfaces.access.jwt import JwtConfig
from signoff.surfaces.web.config import WebConfig, WebhookConfig
from tests.helpers import Recorder, definition

SECRET = "s3cr3t-" + "x" * 40


def _definition_with_callback_secret() -> ActionDefinition:
    return definition(Recorder(), mode="deferred", callback_secret=SECRET)


@pytest.mark.parametrize(
    "holder",
    [
        lambda: JwtConfig(secret=SECRET),
        lambda: WebhookConfig(secret=SECRET, url="http://127.0.0.1:9/hook"),
        lambda: WebConfig(session_secret=SECRET, callback_secret=SECRET),
        lambda: WebConfig(
            session_secret=SECRET, webhook=WebhookConfig(secret=SECRET, url="http://127.0.0.1:9/")
        ),
        _definition_with_callback_secret,
    ],
    ids=["jwt", "webhook", "web", "web-with-webhook", "action-definition"],
)
def test_repr_never_shows_a_secret(holder: Any) -> None:
    value = holder()
    assert SECRET not in repr(value)
    assert SECRET not in str(value)
