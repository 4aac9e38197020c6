"""Shared fixtures. Database URLs come from SIGNOFF_TEST_POSTGRES_URL / SIGNOFF_TEST_MYSQL_URL."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The demo domain (examples.invoices) and test helpers import from the repository root.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
