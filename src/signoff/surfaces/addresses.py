"""Addresses: which hosts count as this machine (a plain function every surface and the CLI share)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8`` or ``::1`` (brackets allowed)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
