"""Importing ``module:function`` references for executors and guards."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


class HookImportError(Exception):
    """The reference cannot be turned into a callable taking one ExecutionContext."""


def add_import_root(directory: Path) -> None:
    """Make hooks next to the manifests importable: the manifest directory's parent goes first."""
    root = str(directory.resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)


def import_hook(reference: str) -> Callable[..., Any]:
    """Import ``package.module:attr.attr`` and check it can take one positional argument."""
    module_name, _, attribute = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # anything a module does at import time is the author's mistake
        raise HookImportError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise HookImportError(f"{module_name!r} has no attribute {attribute!r}") from None
    if not callable(target):
        raise HookImportError(f"{reference} is a {type(target).__name__}, not a callable")
    try:
        inspect.signature(target).bind(None)
    except TypeError:
        raise HookImportError(
            f"{reference} must take exactly one argument (the ExecutionContext)"
        ) from None
    except ValueError:  # pragma: no cover - builtins without a signature: trust them
        pass
    hook: Callable[..., Any] = target
    return hook
