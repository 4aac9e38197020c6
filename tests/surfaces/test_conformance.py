"""The official MCP conformance suite against the HTTP server, compared with its baseline."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "conformance" / "run.sh"
VERSION = (ROOT / "tests" / "conformance" / "VERSION").read_text().strip()
TOOLS = Path(os.environ.get("SIGNOFF_CONFORMANCE_DIR", ROOT / ".tools" / "conformance"))


@pytest.mark.slow
@pytest.mark.skipif(
    not (TOOLS / f".installed-{VERSION}").exists(),
    reason="the MCP conformance suite is not installed: `make tools` installs it (npm)",
)
def test_the_http_server_passes_the_mcp_conformance_suite_within_its_baseline() -> None:
    # The test run never downloads: the suite was installed by `make tools`.
    env = {**os.environ, "SIGNOFF_CONFORMANCE_NO_INSTALL": "1"}
    done = subprocess.run(
        [str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False, env=env
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Baseline check passed" in done.stdout
    for scenario in ("server-initialize", "ping", "tools-list", "dns-rebinding-protection"):
        assert f"✓ {scenario}:" in done.stdout
