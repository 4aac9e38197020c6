"""`signoff audit export|verify|checkpoint|keygen|receipt|verify-receipt`: the tamper-evident
trail (docs/audit.md, docs/receipts.md)."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from signoff.cli.options import DEFAULT_DATABASE_URL, DatabaseOption
from signoff.cli.plumbing import fail, open_existing, run

if TYPE_CHECKING:
    from signoff.audit.checkpoints import RoundOutcome
    from signoff.audit.keys import KeyRing
    from signoff.audit.verify import VerifyReport

# The key ring's environment variable (signoff.audit.keys.ENV; a test checks they agree).
KEYS_ENV = "SIGNOFF_AUDIT_KEYS"

TenantOption = Annotated[
    str | None, typer.Option("--tenant", help="Only this tenant (default: every tenant).")
]
KeysOption = Annotated[
    Path | None,
    typer.Option("--keys", envvar=KEYS_ENV, help="The audit key ring (YAML); see docs/audit.md."),
]


def load_keys(path: Path | None) -> KeyRing | None:
    from signoff.audit.keys import KeyRing, KeyRingError

    if path is None:
        return None
    try:
        return KeyRing.load(path)
    except KeyRingError as exc:
        fail(str(exc), exc.code)


def _instant(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        fail(f"{option} must be an ISO 8601 instant, e.g. 2026-12-01T00:00:00Z", "USAGE")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    audit = typer.Typer(help="Export, verify and checkpoint the audit trail.", no_args_is_help=True)
    app.add_typer(audit, name="audit")
    _add_export(audit)
    _add_verify(audit)
    _add_checkpoint(audit)
    _add_keygen(audit)


def _add_export(audit: typer.Typer) -> None:
    @audit.command("export")
    def export(
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        after_seq: Annotated[
            int, typer.Option("--after-seq", min=0, help="Resume after this event seq.")
        ] = 0,
        since: Annotated[
            str | None, typer.Option("--since", help="Only events at or after (ISO 8601).")
        ] = None,
        until: Annotated[
            str | None, typer.Option("--until", help="Only events before (ISO 8601).")
        ] = None,
        output: Annotated[
            Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
        ] = None,
    ) -> None:
        """Events with their hashes in seq order, then the signed checkpoints, as JSON lines."""
        from signoff.audit.export import export_lines

        start, end = _instant(since, "--since"), _instant(until, "--until")

        async def work() -> int:
            store = await open_existing(database)
            count = 0
            sink = output.open("w") if output is not None else sys.stdout
            try:
                async for line in export_lines(
                    store, tenant_id=tenant, after_seq=after_seq, since=start, until=end
                ):
                    sink.write(json.dumps(line, ensure_ascii=False) + "\n")
                    count += 1
            finally:
                if output is not None:
                    sink.close()
                await store.close()
            return count

        count = run(work())
        if output is not None:
            typer.echo(f"{count} lines written to {output}")


def _add_verify(audit: typer.Typer) -> None:
    @audit.command("verify")
    def verify(
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        keys: KeysOption = None,
    ) -> None:
        """Check the hash chains, the signed checkpoints and every run against its events."""
        from signoff.audit.verify import verify_trail

        ring = load_keys(keys)

        async def work() -> VerifyReport:
            store = await open_existing(database)
            try:
                return await verify_trail(store, ring, tenant)
            finally:
                await store.close()

        report = run(work())
        first = report.first
        if first is not None:
            typer.echo(f"first bad: {first.line()}", err=True)
            for problem in report.problems:
                typer.echo(problem.line(), err=True)
            fail(
                f"{len(report.problems)} problems in the audit trail ({report.events} events, "
                f"{report.runs} runs)",
                "AUDIT_INCONSISTENT",
            )
        note = ""
        unverified = report.unverified_checkpoints + report.unverified_rounds
        if unverified:
            note = f"; {unverified} checkpoint signatures not checked (no --keys)"
        typer.echo(
            f"audit trail consistent for {report.runs} runs: {report.events} events in "
            f"{report.tenants} chains ({report.pre_chain} pre-chain), "
            f"{report.checkpoints} checkpoints in {report.rounds} rounds{note}"
        )


def _add_checkpoint(audit: typer.Typer) -> None:
    @audit.command("checkpoint")
    def checkpoint(
        database: DatabaseOption = DEFAULT_DATABASE_URL,
        tenant: TenantOption = None,
        keys: KeysOption = None,
    ) -> None:
        """Sign a checkpoint of every chain head that moved since its last one, as one round."""
        from signoff.audit.checkpoints import RoundRefused, checkpoint_heads

        ring = load_keys(keys)
        if ring is None or ring.signing_key is None:
            fail(
                f"checkpoints need a key ring with a signing_key (--keys or {KEYS_ENV})",
                "AUDIT_KEYS_MISSING",
            )

        async def work() -> RoundOutcome:
            store = await open_existing(database)
            try:
                return await checkpoint_heads(store, ring, datetime.now(UTC), tenant)
            except RoundRefused as exc:
                fail(str(exc), exc.code)
            finally:
                await store.close()

        outcome = run(work())
        if outcome.lost is not None:
            typer.echo(
                f"someone else checkpointed round {outcome.lost} at the same time; "
                "nothing signed here"
            )
            return
        where = f" in round {outcome.round}" if outcome.round is not None else ""
        typer.echo(
            f"{len(outcome.checkpoints)} checkpoints signed with key {ring.signing_key!r}{where}"
        )


def _add_keygen(audit: typer.Typer) -> None:
    @audit.command("keygen")
    def keygen(
        key_id: Annotated[str, typer.Argument(help="The new key's id, e.g. k2026-12.")],
        directory: Annotated[
            Path, typer.Option("--dir", help="Where to write <id>.pem and <id>.pub.pem.")
        ] = Path("."),
    ) -> None:
        """Make an Ed25519 key pair for signing checkpoints and print its key ring entry."""
        from signoff.audit.keys import generate_ed25519

        if not key_id or "/" in key_id or os.sep in key_id or key_id.startswith("."):
            fail("a key id is a plain file name", "USAGE")
        try:
            private, public = generate_ed25519(directory, key_id)
        except FileExistsError:
            fail(f"{directory / (key_id + '.pem')} exists; choose another key id", "USAGE")
        except OSError as exc:
            fail(f"cannot write to {directory}: {exc.strerror}", "USAGE")
        typer.echo(
            f"- id: {key_id}\n  algorithm: ed25519\n  private_key_file: {private.name}\n"
            f"# public half for auditors: {public}"
        )

    from signoff.cli.receipts import register as register_receipts

    register_receipts(audit)
