"""Print the base install's requirements (``[project].dependencies``), one a line.

``make tools`` downloads their wheels into ``.tools/wheelhouse`` with them, so the fresh-install
test installs the built wheel offline: ``pip install --no-index --find-links .tools/wheelhouse``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    print("\n".join(project["dependencies"]))
