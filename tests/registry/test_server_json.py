"""``server.json`` describes signoff to the official MCP Registry: it validates against the
registry's published schema (vendored beside this file), names this version of the PyPI package,
starts it the way the CLI takes, and asks hosts only for settings signoff really reads."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

import signoff
from signoff.cli.serve_settings import Transport
from signoff.settings import BY_NAME

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCHEMA = json.loads((HERE / "server.schema.json").read_text())
SERVER = json.loads((ROOT / "server.json").read_text())
# The registry's transport types, and the --transport value each one is served with.
TRANSPORTS = {"stdio": Transport.STDIO, "streamable-http": Transport.HTTP}


def problems(document: dict[str, Any]) -> list[str]:
    validator = jsonschema_rs.validator_for(SCHEMA)
    return [
        f"/{'/'.join(map(str, e.instance_path))}: {e.message}"
        for e in validator.iter_errors(document)
    ]


def test_server_json_is_valid_under_the_registrys_schema() -> None:
    assert problems(SERVER) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "signoff"), ("description", "x" * 101), ("version", 1)],
)
def test_the_vendored_schema_refuses_what_the_registry_refuses(field: str, value: object) -> None:
    broken = {**SERVER, field: value}

    assert problems(broken) != []


def test_a_package_without_its_transport_is_refused() -> None:
    broken = copy.deepcopy(SERVER)
    del broken["packages"][0]["transport"]

    assert problems(broken) != []


def test_the_vendored_schema_is_the_copy_its_note_names() -> None:
    note = (HERE / "README.md").read_text()
    digest = hashlib.sha256((HERE / "server.schema.json").read_bytes()).hexdigest()

    assert digest in note
    assert SERVER["$schema"] == (
        "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    )


def test_every_package_is_this_version_of_the_pypi_package_started_with_uvx() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    assert SERVER["version"] == signoff.__version__
    for package in SERVER["packages"]:
        assert (package["registryType"], package["identifier"]) == ("pypi", project["name"])
        assert package["version"] == signoff.__version__
        assert package["runtimeHint"] == "uvx"


def test_each_package_serves_its_transport_with_the_arguments_the_cli_takes() -> None:
    served = set()
    for package in SERVER["packages"]:
        arguments = [
            (a["type"], a.get("name"), a.get("value")) for a in package["packageArguments"]
        ]
        transport = TRANSPORTS[package["transport"]["type"]]
        served.add(transport)
        assert arguments == [
            ("positional", None, "serve"),
            ("named", "--transport", transport.value),
        ]
    assert served == set(Transport)


def test_hosts_are_asked_only_for_settings_signoff_reads_and_secrets_are_marked() -> None:
    for package in SERVER["packages"]:
        for variable in package["environmentVariables"]:
            setting = BY_NAME[variable["name"]]
            assert variable.get("isSecret", False) == setting.secret, setting.name
            if "default" in variable:
                assert variable["default"] == setting.default, setting.name


def test_the_http_package_names_the_port_it_is_told_to_serve_on() -> None:
    (http,) = [p for p in SERVER["packages"] if p["transport"]["type"] == "streamable-http"]
    url = http["transport"]["url"]
    placeholders = set(re.findall(r"\{([A-Z_]+)\}", url))

    assert placeholders <= {v["name"] for v in http["environmentVariables"]}
    assert url.endswith("/mcp")


def test_the_readme_names_the_server_for_the_registrys_ownership_check() -> None:
    readme = (ROOT / "README.md").read_text()

    assert f"mcp-name: {SERVER['name']}" in readme
