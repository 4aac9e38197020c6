"""The shipped deployment files are checked by the tools that will read them: ``nginx -t`` on the
nginx config (with a throwaway certificate where it names the real one) and ``systemd-analyze
verify`` on the unit (with this checkout's ``signoff`` where it names /srv's).

``.ci/run`` installs Debian's nginx. Locally a missing nginx or systemd-analyze skips with the
reason; in CI (``CI=true``) a missing nginx is a failure.
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from signoff.settings import BY_NAME

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "server" / "multi-instance-postgres"
NGINX_CONF = SERVER / "nginx.conf"
UNIT = SERVER / "signoff@.service"
TLS_DIR = "/etc/signoff/tls/"
SIGNOFF_BIN = "/srv/signoff/.venv/bin/signoff"


def nginx() -> str:
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if Path(p).exists()), None
    )
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is not installed: .ci/run installs Debian's nginx-light")
        pytest.skip("nginx is not installed (apt-get install nginx-light; .ci/run does)")
    return found


def self_signed(directory: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "signoff.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (directory / "fullchain.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (directory / "privkey.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def nginx_test(site: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``nginx -t`` on ``site`` included from an http block, as Debian's conf.d does."""
    self_signed(tmp_path)
    (tmp_path / "site.conf").write_text(site.replace(TLS_DIR, f"{tmp_path}/"))
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n    access_log off;\n    client_body_temp_path {tmp_path}/body;\n"
        f"    proxy_temp_path {tmp_path}/proxy;\n    include {tmp_path}/site.conf;\n}}\n"
    )
    return subprocess.run(
        [nginx(), "-t", "-c", str(tmp_path / "nginx.conf"), "-p", f"{tmp_path}/"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_nginx_config_passes_nginx_t(tmp_path: Path) -> None:
    site = NGINX_CONF.read_text()
    assert TLS_DIR in site  # the certificate paths the test replaces are the ones shipped

    done = nginx_test(site, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


def test_nginx_t_catches_a_broken_config(tmp_path: Path) -> None:
    broken = NGINX_CONF.read_text().replace("proxy_buffering off;", "proxy_buffering off", 1)

    done = nginx_test(broken, tmp_path)

    assert done.returncode != 0


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed (it comes with systemd)")
    return found


def verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify`` on the template as instance ``instance-a``."""
    unit = tmp_path / "signoff@instance-a.service"
    unit.write_text(unit_text.replace(SIGNOFF_BIN, str(Path(sys.executable).parent / "signoff")))
    return subprocess.run(
        [systemd_analyze(), "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    text = UNIT.read_text()
    assert SIGNOFF_BIN in text

    done = verify(text, tmp_path)
    own = [line for line in done.stderr.splitlines() if "signoff@instance-a.service" in line]

    assert done.returncode == 0, done.stderr
    assert own == []  # not even a warning (an unknown key is only a warning to systemd)


def test_systemd_analyze_catches_a_broken_unit(tmp_path: Path) -> None:
    broken = UNIT.read_text().replace("TimeoutStopSec=30", "TimeoutStopSecs=30")

    done = verify(broken, tmp_path)

    assert "TimeoutStopSecs" in done.stderr


def test_the_unit_gives_shutdown_more_time_than_its_grace() -> None:
    lines = dict(
        line.split("=", 1)
        for line in UNIT.read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    grace = float(BY_NAME["SIGNOFF_SHUTDOWN_GRACE"].default or "0")

    assert float(lines["TimeoutStopSec"]) > grace


def test_the_env_files_set_only_settings_signoff_reads() -> None:
    names = set()
    for path in sorted(SERVER.glob("*.env*")):
        for line in path.read_text().splitlines():
            if line and not line.startswith("#"):
                names.add(line.split("=", 1)[0])
    assert names and sorted(names - set(BY_NAME)) == []
