"""Executors a manifest can name besides a Python hook: today the declarative HTTP executor."""
