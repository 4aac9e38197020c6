"""`signoff audit receipt|verify-receipt`: one run's evidence, checked with no database
(docs/receipts.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from signoff.cli.audit import KeysOption, TenantOption, load_keys
from signoff.cli.options import (
    DEFAULT_DATABASE_URL,
    DEFAULT_MANIFESTS,
    DatabaseOption,
    ManifestsOption,
)
from signoff.cli.plumbing import fail, open_existing, registry_or_fail, run
from signoff.cli.remote import ApiClient, ServerOption, TokenOption, run_path

if TYPE_CHECKING:
    from signoff.audit.keys import KeyRing
    from signoff.audit.receipt_check import SignatureCheck
    from signoff.core.definition import ActionDefinition


def _definition(manifests: str, action_id: str) -> ActionDefinition | None:
    """The run's action as the manifests define it (its sensitive fields), if they are here."""
    if not Path(manifests).is_dir():
        return None
    compiled = registry_or_fail(manifests).resolve(action_id)
    return compiled.definition if compiled is not None else None


def _write(document: dict[str, Any], output: Path | None) -> None:
    text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}", "USAGE")
    typer.echo(f"receipt of run {document.get('run_id')} written to {output}")


def _local_receipt(
    database: str,
    given: str,
    tenant: str | None,
    ring: KeyRing | None,
    manifests: str,
    reveal: bool,
    checkpoint: bool,
) -> dict[str, Any]:
    from signoff.audit.checkpoints import RoundRefused, checkpoint_heads
    from signoff.audit.receipt import ReceiptRefused, make_receipt
    from signoff.cli.run_ids import resolve_run_id
    from signoff.core.codes import Code

    async def work() -> dict[str, Any]:
        store = await open_existing(database)
        try:
            run_id = await resolve_run_id(store, given, tenant)
            if run_id is None:
                fail(f"no run {given}", Code.ACTION_RUN_NOT_FOUND)
            async with store.unit() as unit:
                found = await unit.runs.get(run_id)
            definition = _definition(manifests, found.action_id) if found is not None else None
            for attempt in (1, 2):
                try:
                    return await make_receipt(
                        store,
                        run_id,
                        ring,
                        datetime.now(UTC),
                        tenant_id=tenant,
                        definition=definition,
                        reveal=reveal,
                    )
                except ReceiptRefused as exc:
                    if exc.code != Code.RECEIPT_NOT_ANCHORED or not checkpoint or attempt == 2:
                        fail(str(exc), exc.code)
                assert ring is not None and found is not None  # signing keys were required
                try:
                    await checkpoint_heads(store, ring, datetime.now(UTC), found.tenant_id)
                except RoundRefused as exc:
                    fail(str(exc), exc.code)
            raise AssertionError("unreachable")
        finally:
            await store.close()

    return run(work())


def _signature_check(keys: list[Path], ring: KeyRing | None) -> SignatureCheck:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    from signoff.audit.receipt_check import either, public_keys_check, ring_check

    public: list[Ed25519PublicKey] = []
    for path in keys:
        try:
            loaded: object = load_pem_public_key(path.read_bytes())
        except OSError as exc:
            fail(f"cannot read {path}: {exc.strerror}", "AUDIT_KEYS_INVALID")
        except (ValueError, UnsupportedAlgorithm):
            loaded = None
        if not isinstance(loaded, Ed25519PublicKey):
            fail(f"{path} is not an Ed25519 public key (PEM)", "AUDIT_KEYS_INVALID")
        public.append(loaded)
    checks = [public_keys_check(public)]
    if ring is not None:
        checks.append(ring_check(ring))
    return either(*checks)


def register(audit: typer.Typer) -> None:
    """Add the receipt commands to ``signoff audit``."""

    @audit.command("receipt")
    def receipt(
        run_id: Annotated[str, typer.Argument(help="The run's id (whole, or its short id).")],
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        keys: KeysOption = None,
        manifests: ManifestsOption = DEFAULT_MANIFESTS,
        reveal: Annotated[
            bool,
            typer.Option(
                "--reveal",
                help="Show every value whole, sensitive fields included (default: masked).",
            ),
        ] = False,
        checkpoint: Annotated[
            bool,
            typer.Option(
                "--checkpoint",
                help="If no signed checkpoint covers the run yet, sign a round first.",
            ),
        ] = False,
        output: Annotated[
            Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
        ] = None,
        server: ServerOption = None,
        token: TokenOption = None,
    ) -> None:
        """One finished run's evidence as one JSON document, verifiable with no database."""
        if server is not None:
            if reveal or checkpoint:
                fail("--reveal and --checkpoint work on the database, not with --server", "USAGE")
            document = ApiClient(server, token).get(f"{run_path(run_id)}/receipt")
            _write(document, output)
            return
        ring = load_keys(keys)
        _write(
            _local_receipt(database, run_id, tenant, ring, manifests, reveal, checkpoint), output
        )

    @audit.command("verify-receipt")
    def verify_receipt(
        file: Annotated[Path, typer.Argument(help="The receipt (JSON), or - for stdin.")],
        key: Annotated[
            list[Path] | None,
            typer.Option("--key", help="An Ed25519 public key (PEM) that may have signed it."),
        ] = None,
        keys: KeysOption = None,
    ) -> None:
        """Check a receipt with no database: its chain, signatures, digests and decisions."""
        import sys

        from signoff.audit.receipt_check import ReceiptProblem
        from signoff.audit.receipt_check import verify_receipt as check_receipt

        ring = load_keys(keys)
        if not key and ring is None:
            fail("give the public key that signs checkpoints: --key PEM (or --keys RING)", "USAGE")
        check = _signature_check(list(key or ()), ring)
        try:
            text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}", "USAGE")
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            fail(f"{file} is not JSON", "RECEIPT_MALFORMED")
        try:
            summary = check_receipt(document, check)
        except ReceiptProblem as exc:
            fail(f"the receipt does not hold: {exc}", exc.code)
        typer.echo(summary.line())
