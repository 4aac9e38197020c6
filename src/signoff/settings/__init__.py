"""Every setting signoff reads from the environment, in one catalog.

Each module still reads its own variables (``JwtConfig.from_env``, ``ServeSettings``, ...); this
catalog is what people and tools see of them: ``signoff init`` writes an env file with every
setting commented out (``env_file``), the docs' settings reference and ``server.json``'s
environment variables are checked against it, and a test fails when the source reads a
``SIGNOFF_*`` variable the catalog does not list (or lists one nobody reads).
"""

from __future__ import annotations

from signoff.settings.catalog import GROUPS
from signoff.settings.model import Group, Setting
from signoff.settings.render import env_file, markdown_table

SETTINGS: tuple[Setting, ...] = tuple(s for group in GROUPS for s in group.settings)
BY_NAME = {setting.name: setting for setting in SETTINGS}

__all__ = ["BY_NAME", "GROUPS", "SETTINGS", "Group", "Setting", "env_file", "markdown_table"]
