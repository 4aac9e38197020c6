"""`signoff check` (validate manifests, run their policy tests) and `signoff schema`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from signoff.cli.options import DEFAULT_MANIFESTS, ManifestsOption

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from signoff.manifest import LoadedAction, ManifestProblem, ManifestSet


def approval_rule(action: LoadedAction) -> str:
    """The approval rule in a few words, as the table shows it."""
    from signoff.core.definition import ApprovalSpec, default_approval_rule

    spec = action.manifest.spec
    approval = spec.approval
    if approval is None:
        default = ApprovalSpec()
        stops = default_approval_rule(spec.effect, spec.risk)
        if stops is None:
            return "none (default)"
        return f"{stops} (default) -> {default.count} of {', '.join(default.approver_roles)}"
    when = approval.when
    if when is False or when == "false":
        return "never"
    condition = "always" if when is True or when == "true" else str(when).strip()
    roles = ", ".join(approval.approvers.roles)
    return f"{condition} -> {approval.approvers.count} of {roles}"


def limits_rule(action: LoadedAction) -> str:
    """Each cumulative limit in a few words: ``daily: 5 calls, sum input.amount <= 1000 per
    principal / 24h -> approval``."""
    rules = []
    for limit in action.manifest.spec.limits:
        bounds = []
        if limit.count is not None:
            bounds.append(f"{limit.count} calls")
        if limit.sum is not None:
            bounds.append(f"sum {limit.sum} <= {limit.max:g}" if limit.max is not None else "")
        rules.append(
            f"{limit.name}: {', '.join(bounds)} per {limit.per} / {limit.window} -> "
            f"{limit.on_exceed}"
        )
    return "\n".join(rules) or "none"


def _table(loaded: ManifestSet) -> Table:
    from rich.table import Table

    table = Table(title=f"{len(loaded.actions)} actions in {loaded.source}")
    for column in ("id", "effect", "risk", "approval", "limits", "executor"):
        table.add_column(column, overflow="fold")
    for action in loaded.actions:
        spec = action.manifest.spec
        kind = "http" if spec.executor.http is not None else "python"
        table.add_row(
            action.id,
            spec.effect,
            spec.risk,
            approval_rule(action),
            limits_rule(action),
            f"{spec.executor.mode} {kind}",
        )
    return table


def _report(err: Console, problems: list[ManifestProblem]) -> None:
    """Each problem (error or warning) with its source line and a caret, in file order."""
    from signoff.manifest.errors import in_file_order
    from signoff.manifest.yaml_hints import excerpt

    for problem in in_file_order(problems):
        err.print(str(problem), markup=False, highlight=False, soft_wrap=True)
        shown = excerpt(problem)
        if shown is not None:
            err.print(shown, markup=False, highlight=False, soft_wrap=True)


def _warnings(count: int) -> str:
    return f" ({count} warning{'s' * (count != 1)})" if count else ""


def manifest_source(path: Path) -> Path:
    """``path`` itself, unless it is a project directory (``signoff init``'s layout): a folder
    with a ``manifests/`` folder and no manifest of its own at the top, whose manifests are
    ``manifests/`` (and whose hooks then import from the project directory)."""
    top = [p for p in path.glob("*") if p.suffix in (".yaml", ".yml")] if path.is_dir() else []
    if path.is_dir() and (path / "manifests").is_dir() and not top:
        return path / "manifests"
    return path


def check_manifests(source: Path, out: Console, err: Console) -> int:
    """Validate, print the table and the test cases; the exit status (0 only if all is well).

    Warnings are printed like problems (marked ``warning``) and do not change the status."""
    from signoff.manifest import ManifestErrors, load_manifests, run_cases

    source = manifest_source(source)
    try:
        loaded = load_manifests(source)
    except ManifestErrors as exc:
        _report(err, [*exc.problems, *exc.warnings])
        files = len({problem.file for problem in exc.problems})
        count = len(exc.problems)
        err.print(
            f"{count} problem{'s' * (count != 1)} in {files} file{'s' * (files != 1)}"
            f"{_warnings(len(exc.warnings))}; the manifests were not loaded [MANIFEST_INVALID]",
            markup=False,
            highlight=False,
        )
        return 1
    _report(err, list(loaded.warnings))
    out.print(_table(loaded))
    results = run_cases(loaded)
    failed = [result for result in results if not result.passed]
    for result in results:
        where = f"{result.file}:{result.line}"
        if result.passed:
            line = f"ok    {result.action_id}: {result.name} -> {result.actual}"
            out.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            line = (
                f"FAIL  {where}: {result.action_id}: {result.name}: expected {result.expected},"
                f" got {result.actual} ({result.detail})"
            )
            err.print(line, markup=False, highlight=False, soft_wrap=True)
    summary = f"{len(results) - len(failed)} of {len(results)} test cases passed"
    if failed:
        err.print(f"{summary} [MANIFEST_TESTS_FAILED]", markup=False, highlight=False)
        return 1
    out.print(
        f"{summary}; the manifests are valid{_warnings(len(loaded.warnings))}",
        markup=False,
        highlight=False,
    )
    return 0


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""

    @app.command("check")
    def check(
        directory: Annotated[
            Path | None,
            typer.Argument(
                help="Manifest directory or file, or a project directory holding manifests/ "
                "(default: --manifests)."
            ),
        ] = None,
        manifests: ManifestsOption = DEFAULT_MANIFESTS,
    ) -> None:
        """Validate the action manifests and run their tests: cases; exit 1 listing every error."""
        from rich.console import Console

        status = check_manifests(
            directory if directory is not None else Path(manifests),
            Console(),
            Console(stderr=True),
        )
        raise typer.Exit(status)

    @app.command("schema")
    def schema() -> None:
        """Print the JSON Schema of the manifest format (for editor completion and checks)."""
        from signoff.manifest import shipped_schema_text

        typer.echo(shipped_schema_text(), nl=False)
