"""The demo that ships in the package: the invoice actions' manifests and their domain code.

``signoff demo`` serves ``MANIFESTS`` (this package's ``manifests/`` folder), whose hooks point at
``signoff.demo.invoices``, so an install without the repository has everything the demo needs.
"""

from __future__ import annotations

from pathlib import Path

MANIFESTS = Path(__file__).resolve().parent / "manifests"

__all__ = ["MANIFESTS"]
