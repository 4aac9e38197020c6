"""The JSON Schema of the manifest format, and field lookups for "did you mean" suggestions.

``manifest.schema.json`` ships in the package (``signoff schema`` prints it); a test keeps it equal
to what the pydantic models generate, so the file editors use never drifts from the loader.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from signoff.manifest.model import Manifest

SCHEMA_FILE = "manifest.schema.json"
SCHEMA_ID = "urn:signoff:schema:manifest:v1"


def manifest_json_schema() -> dict[str, Any]:
    """Generate the schema from the models (what ``manifest.schema.json`` must contain)."""
    schema = Manifest.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "signoff action manifest",
    }


def render_schema() -> str:
    return json.dumps(manifest_json_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema_text() -> str:
    """The schema file as shipped in the package."""
    return resources.files("signoff.manifest").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


@cache
def _generated() -> dict[str, Any]:
    return manifest_json_schema()


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    """Follow local ``$ref``s and pick the object branch of ``anyOf: [X, null]``."""
    root = _generated()
    while True:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            node = root["$defs"][ref.removeprefix("#/$defs/")]
            continue
        branches = [b for b in node.get("anyOf", []) if b.get("type") != "null"]
        if len(branches) == 1:
            node = branches[0]
            continue
        return node


def allowed_fields(path: Sequence[str | int]) -> list[str]:
    """The field names the format allows in the mapping at ``path`` (empty when free-form)."""
    node = _resolve(_generated())
    for part in path:
        if isinstance(part, int) and "items" in node:
            node = _resolve(node["items"])
        elif isinstance(part, str) and part in node.get("properties", {}):
            node = _resolve(node["properties"][part])
        elif isinstance(node.get("additionalProperties"), dict):
            node = _resolve(node["additionalProperties"])
        elif node.get("patternProperties"):
            node = _resolve(next(iter(node["patternProperties"].values())))
        else:
            return []
    if node.get("additionalProperties") is False:
        return list(node.get("properties", {}))
    return []
