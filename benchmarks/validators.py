"""Input validation per call: ``jsonschema`` (pure Python) against ``jsonschema-rs`` (compiled).

Validates the demo ``invoice.cancel`` input schema on a valid and an invalid input, as the
pipeline does on every proposal (``is_valid`` for a valid input, every error for an invalid
one), and prints microseconds per call.

    .venv/bin/python benchmarks/validators.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import jsonschema_rs

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_id": {"type": "string", "pattern": "^INV-[0-9]+$"},
        "amount": {"type": "number", "minimum": 0},
        "reason": {"type": "string", "maxLength": 500},
    },
    "required": ["invoice_id", "amount"],
    "additionalProperties": False,
}
VALID = {"invoice_id": "INV-1002", "amount": 4200.0, "reason": "duplicate invoice"}
INVALID = {"invoice_id": "INV-1002\n", "amount": -1, "extra": True}


def per_call(work: Callable[[], object], calls: int) -> float:
    for _ in range(min(calls, 1000)):
        work()
    started = time.perf_counter()
    for _ in range(calls):
        work()
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    calls = parser.parse_args().calls
    python = jsonschema.Draft202012Validator(
        SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    rust = jsonschema_rs.Draft202012Validator(SCHEMA, validate_formats=True)
    rows = [
        ("valid input", lambda: python.is_valid(VALID), lambda: rust.is_valid(VALID)),
        (
            "invalid input, every error",
            lambda: list(python.iter_errors(INVALID)),
            lambda: list(rust.iter_errors(INVALID)),
        ),
    ]
    print("| case | jsonschema µs | jsonschema-rs µs | speed-up |")
    print("|---|---|---|---|")
    for name, slow, fast in rows:
        a, b = per_call(slow, calls), per_call(fast, calls)
        print(f"| {name} | {a:.1f} | {b:.1f} | {a / b:.1f}x |")
    trailing = {**VALID, "invoice_id": "INV-1002\n"}
    print(
        f"\n`INV-1002\\n` matches `^INV-[0-9]+$`: jsonschema {python.is_valid(trailing)}, "
        f"jsonschema-rs {rust.is_valid(trailing)} (ECMA-262: no match)"
    )


if __name__ == "__main__":
    main()
