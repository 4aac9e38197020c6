"""A package that stands alone: the built wheel, installed into a fresh virtualenv outside the
checkout, runs ``signoff --version``, ``init``, ``check`` and ``demo`` - with pip, ``uvx`` and
``pipx``, as a user would.

Nothing is downloaded here: ``python -m build --no-isolation`` uses the dev install's hatchling,
and every install is ``--no-index`` from ``.tools/wheelhouse``, the base dependencies' wheels that
``make tools`` downloads up front (it says so). Without that folder the tests skip and say why,
except in CI (``CI=true``), where a missing wheelhouse is a failure.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import signoff
from signoff.extras import CODE as EXTRA_MISSING

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / ".tools" / "wheelhouse"
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow

if not (WHEELHOUSE / ".complete").exists():
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"{WHEELHOUSE} is missing: `make tools` downloads it before the tests")
    pytest.skip(
        f"{WHEELHOUSE} is missing: `make tools` downloads the base install's wheels",
        allow_module_level=True,
    )


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


def offline_env(home: Path) -> dict[str, str]:
    """pip, uv and pipx reading nothing but the wheelhouse (no index, no config files)."""
    keep = {"PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT"}
    env = {k: v for k, v in os.environ.items() if k in keep}
    return {
        **env,
        "HOME": str(home),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(WHEELHOUSE),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(WHEELHOUSE),
        "UV_OFFLINE": "1",
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": str(home / "uv-cache"),
        "UV_TOOL_DIR": str(home / "uv-tools"),
        "UV_TOOL_BIN_DIR": str(home / "uv-bin"),
        "PIPX_HOME": str(home / "pipx"),
        "PIPX_BIN_DIR": str(home / "pipx-bin"),
        "PIPX_MAN_DIR": str(home / "pipx-man"),
    }


def run(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    ok(
        run(
            [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
            cwd=out,
            env={**os.environ},
        )
    )
    (wheel,) = out.glob("signoff-*.whl")
    (sdist,) = out.glob("signoff-*.tar.gz")
    return Dist(wheel, sdist)


@pytest.fixture(scope="module")
def venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the base wheel only (no extras), made and used outside the
    checkout."""
    home = tmp_path_factory.mktemp("venv-home")
    env = offline_env(home)
    ok(run([sys.executable, "-m", "venv", str(home / "venv")], cwd=home, env=env))
    python = home / "venv" / "bin" / "python"
    ok(run([str(python), "-m", "pip", "install", "--quiet", str(dist.wheel)], cwd=home, env=env))
    return home / "venv" / "bin"


WHEEL_NEEDS = (
    "signoff/demo/manifests/invoice-cancel.yaml",
    "signoff/demo/invoices/executors.py",
    "signoff/scaffold/manifests/refund-issue.yaml",
    "signoff/manifest/manifest.schema.json",
    "signoff/settings/catalog.toml",
    "signoff/store/sql/migrations/env.py",
    "signoff/py.typed",
)


def test_the_wheel_and_the_sdist_carry_the_demo_the_scaffold_and_the_migrations(
    dist: Dist,
) -> None:
    wheel = set(zipfile.ZipFile(dist.wheel).namelist())
    with tarfile.open(dist.sdist) as archive:
        sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}

    assert [name for name in WHEEL_NEEDS if name not in wheel] == []
    assert [name for name in WHEEL_NEEDS if f"src/{name}" not in sdist] == []
    assert any(re.match(r"signoff/store/sql/migrations/versions/0001_.*\.py$", n) for n in wheel)
    assert not any(name.startswith(("examples/", "tests/", "manifests/")) for name in wheel)


def test_the_base_install_has_no_extra(venv: Path) -> None:
    probe = "import importlib.util as u; print([m for m in ('asyncpg', 'aiomysql', 'slack_sdk', 'authlib', 'opentelemetry.sdk', 'jsonschema_rs') if u.find_spec(m.split('.')[0]) and (m != 'opentelemetry.sdk' or u.find_spec(m))])"
    done = ok(run([str(venv / "python"), "-c", probe], cwd=venv, env=offline_env(venv.parent)))

    assert done.strip() == "['jsonschema_rs']"


def test_version_init_and_check_work_from_the_fresh_install(venv: Path, tmp_path: Path) -> None:
    env = offline_env(tmp_path)
    signoff_bin = str(venv / "signoff")

    version = ok(run([signoff_bin, "--version"], cwd=tmp_path, env=env))
    ok(run([signoff_bin, "init", "shop"], cwd=tmp_path, env=env))
    checked = ok(run([signoff_bin, "check", "shop"], cwd=tmp_path, env=env))

    assert signoff.__version__ in version
    assert "the manifests are valid" in checked
    assert (tmp_path / "shop" / "signoff.env").read_text().count("# SIGNOFF_") > 30


def test_a_configured_feature_without_its_extra_fails_at_start_naming_it(
    venv: Path, tmp_path: Path
) -> None:
    env = offline_env(tmp_path)
    ok(run([str(venv / "signoff"), "init", "p"], cwd=tmp_path, env=env))
    command = [
        str(venv / "signoff"), "serve", "--transport", "stdio", "--principal", "a",
        "--tenant", "t", "--manifests", "p/manifests",
        "--database", "postgresql+asyncpg://signoff@127.0.0.1:9/signoff",
    ]  # fmt: skip

    done = run(command, cwd=tmp_path, env=env, timeout=60)

    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().endswith(f"[{EXTRA_MISSING}]")
    assert "signoff[postgres]" in done.stderr
    assert "Traceback" not in done.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def demo(venv: Path, tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    """``signoff demo`` from the fresh install, in an empty directory, serving on a free port."""
    port = free_port()
    process = subprocess.Popen(
        [str(venv / "signoff"), "demo", "--port", str(port)],
        cwd=tmp_path,
        env=offline_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C stops the server"):
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(120), "".join(lines)
        yield f"http://127.0.0.1:{port}", tmp_path / ".signoff-demo", process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            raise
        finally:
            reader.join(10)
            if process.stdout is not None:
                process.stdout.close()


def test_the_demo_serves_mcp_from_the_fresh_install(
    demo: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    url, state, process = demo
    token = (state / "agent.token").read_text().strip()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "fresh-install-test", "version": "1"},
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
    }

    health = httpx.get(f"{url}/healthz", timeout=30)
    ready = httpx.get(f"{url}/readyz", timeout=30)
    answer = httpx.post(f"{url}/mcp", json=initialize, headers=headers, timeout=30)
    inbox = httpx.get(f"{url}/approvals", timeout=30)
    process.send_signal(signal.SIGTERM)
    stopped = process.wait(60)

    assert answer.status_code == 200, answer.text
    assert '"serverInfo"' in answer.text and '"signoff"' in answer.text
    assert inbox.status_code in (200, 303)
    assert (health.status_code, ready.status_code) == (200, 200)
    assert stopped == 0  # SIGTERM is a graceful stop


def test_uvx_runs_the_wheel(dist: Dist, tmp_path: Path) -> None:
    env = offline_env(tmp_path)
    uvx = [str(BIN / "uvx"), "--python", sys.executable, "--from", str(dist.wheel), "signoff"]

    version = ok(run([*uvx, "--version"], cwd=tmp_path, env=env))
    ok(run([*uvx, "init", "shop"], cwd=tmp_path, env=env))
    checked = ok(run([*uvx, "check", "shop"], cwd=tmp_path, env=env))

    assert signoff.__version__ in version
    assert "the manifests are valid" in checked


def test_pipx_installs_the_wheel(dist: Dist, tmp_path: Path) -> None:
    env = offline_env(tmp_path)
    pipx = str(BIN / "pipx")

    ok(run([pipx, "install", "--python", sys.executable, str(dist.wheel)], cwd=tmp_path, env=env))
    installed = tmp_path / "pipx-bin" / "signoff"
    version = ok(run([str(installed), "--version"], cwd=tmp_path, env=env))
    ok(run([str(installed), "init", "shop"], cwd=tmp_path, env=env))
    checked = ok(run([str(installed), "check", "shop"], cwd=tmp_path, env=env))

    assert signoff.__version__ in version
    assert "the manifests are valid" in checked
