"""The official MCP conformance suite against the HTTP server, compared with its baseline."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "conformance" / "run.sh"


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("npm") is None and not (ROOT / ".tools/conformance/node_modules").exists(),
    reason="npm is not installed: the conformance suite (Node 22, npm) cannot be fetched",
)
def test_the_http_server_passes_the_mcp_conformance_suite_within_its_baseline() -> None:
    done = subprocess.run(
        [str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Baseline check passed" in done.stdout
    for scenario in ("server-initialize", "ping", "tools-list", "dns-rebinding-protection"):
        assert f"✓ {scenario}:" in done.stdout
