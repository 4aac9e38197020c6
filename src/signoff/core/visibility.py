"""Who may read a run, and what of it they see (contract §5): the one owner of both rules.

Reads follow the same visibility as duplicates, so a read never discloses what a replay would not:

- an **agent** reads the runs its own principal proposed in its tenant, plus runs of actions
  declared shareable (idempotency scope ``tenant``);
- an **approver** reads the runs of its tenant waiting for a role it holds, and the runs it decided;
- anything else is answered exactly like a run that does not exist.

``sensitive`` (manifest ``spec.sensitive``) names JSON pointers (RFC 6901) into the run's
``/input`` and ``/output``; a bare name ``reason`` means ``/input/reason``. Every surface shows the
masked run; only the executor's own context sees the real values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from signoff.core.definition import ActionDefinition, DuplicateVisibility
from signoff.core.identity import Principal
from signoff.core.results import ActionOutcome
from signoff.core.run import ActionRun, RunStatus

MASK = "••••••"
# The duplicate-scope value of a tenant-wide (shareable) reservation, as the pipeline records it.
TENANT_WIDE = "*"
_ROOTS = ("input", "output")


class ReaderKind(StrEnum):
    AGENT = "agent"
    APPROVER = "approver"


@dataclass(frozen=True, slots=True)
class Reader:
    """Who is reading: a verified principal, its tenant, and which kind of credential it holds."""

    principal: Principal
    tenant_id: str
    kind: ReaderKind = ReaderKind.AGENT


def shared_with_tenant(run: ActionRun, definition: ActionDefinition | None) -> bool:
    """The run belongs to a shareable action. The scope recorded with the run's reservation
    decides; a run that reserved nothing (no key, refused early) follows its action's manifest."""
    if run.duplicate_scope is not None:
        return run.duplicate_scope.visibility == TENANT_WIDE
    return definition is not None and definition.idempotency.scope is DuplicateVisibility.TENANT


def may_read(run: ActionRun, reader: Reader, definition: ActionDefinition | None) -> bool:
    """Whether ``reader`` may see ``run`` at all (``definition``: the run's action, if known)."""
    if run.tenant_id != reader.tenant_id:
        return False
    if reader.kind is ReaderKind.APPROVER:
        return approver_may_read(run, reader.principal)
    return run.principal.id == reader.principal.id or shared_with_tenant(run, definition)


def approver_may_read(run: ActionRun, approver: Principal) -> bool:
    """Waiting for a role the approver holds, or decided (in part) by this approver."""
    state = run.approval
    if state is None:
        return False
    if state.decided_by(approver.id) is not None:
        return True
    return run.status is RunStatus.WAITING_APPROVAL and approver.has_any_role(state.approver_roles)


def approver_may_address(run: ActionRun, approver: Principal) -> bool:
    """Whether a decision from ``approver`` is answered with the run's own codes at all: its
    approval names a role the approver holds, or the approver decided it. Anything else is
    answered like a missing run, so a decision never discloses a run outside the approver's
    domain; a late decision on a run it could have decided still hears ``APPROVAL_EXPIRED`` or
    ``APPROVAL_NOT_PENDING``."""
    state = run.approval
    if state is None:
        return False
    return state.decided_by(approver.id) is not None or approver.has_any_role(state.approver_roles)


# ------------------------------------------------------------------------------ sensitive fields


class PointerError(ValueError):
    """A ``sensitive`` entry is not a JSON pointer into ``/input`` or ``/output``."""


def parse_sensitive(entry: str) -> tuple[str, tuple[str, ...]]:
    """``reason`` -> ``("input", ("reason",))``; ``/output/card/number`` -> ``("output", (...))``."""
    if not entry.startswith("/"):
        if not entry:
            raise PointerError("an empty sensitive entry")
        return "input", (entry,)
    tokens = [_unescape(token) for token in entry.split("/")[1:]]
    if len(tokens) < 2 or tokens[0] not in _ROOTS:
        raise PointerError(f"{entry!r} must point into /input/... or /output/...")
    return tokens[0], tuple(tokens[1:])


def _unescape(token: str) -> str:
    if "~" in token.replace("~0", "").replace("~1", ""):
        raise PointerError(f"bad escape in JSON pointer token {token!r}")
    return token.replace("~1", "/").replace("~0", "~")


def mask_document(document: Any, paths: Iterable[Sequence[str]]) -> Any:
    """A copy of ``document`` with the value at each path replaced by ``MASK`` (paths that do not
    exist are ignored; array elements are addressed by index)."""
    wanted = [tuple(path) for path in paths if path]
    if not wanted or not isinstance(document, dict | list):
        return document
    return _masked(document, wanted)


def _masked(node: Any, paths: list[tuple[str, ...]]) -> Any:
    if isinstance(node, dict):
        items: Iterable[tuple[Any, Any]] = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return node
    copied: dict[Any, Any] = {}
    for key, value in items:
        here = [path[1:] for path in paths if path[0] == str(key)]
        if any(not rest for rest in here):
            copied[key] = MASK
        elif here:
            copied[key] = _masked(value, here)
        else:
            copied[key] = value
    return list(copied.values()) if isinstance(node, list) else copied


def sensitive_paths(definition: ActionDefinition | None) -> dict[str, list[tuple[str, ...]]]:
    """The action's sensitive entries by root (``input``/``output``)."""
    return paths_by_root(definition.sensitive_fields if definition is not None else ())


def paths_by_root(entries: Iterable[str]) -> dict[str, list[tuple[str, ...]]]:
    """Sensitive entries by root (``input``/``output``); an unparseable one is masked as the
    input field of that name, never ignored."""
    found: dict[str, list[tuple[str, ...]]] = {root: [] for root in _ROOTS}
    for entry in entries:
        try:
            root, path = parse_sensitive(entry)
        except PointerError:
            root, path = "input", (entry,)
        found[root].append(path)
    return found


def masked_run(run: ActionRun, definition: ActionDefinition | None) -> ActionRun:
    """The run as any surface shows it: sensitive values masked in the proposed input, the
    approved input, each amendment's before and after, and the output."""
    paths = sensitive_paths(definition)
    if not paths["input"] and not paths["output"]:
        return run
    changes: dict[str, Any] = {"input": mask_document(run.input, paths["input"])}
    if run.approved_input is not None:
        changes["approved_input"] = mask_document(run.approved_input, paths["input"])
    if run.amendments:
        changes["amendments"] = tuple(
            a.model_copy(
                update={
                    "changes": mask_document(a.changes, paths["input"]),
                    "previous": mask_document(a.previous, paths["input"]),
                }
            )
            for a in run.amendments
        )
    if run.result is not None and run.result.output is not None and paths["output"]:
        output = mask_document(run.result.output, paths["output"])
        changes["result"] = run.result.model_copy(update={"output": output})
    return run.model_copy(update=changes)


def masked_outcome(outcome: ActionOutcome, definition: ActionDefinition | None) -> ActionOutcome:
    """An outcome as a surface returns it: sensitive output and approved-input values masked."""
    paths = sensitive_paths(definition)
    changes: dict[str, Any] = {}
    if paths["output"] and outcome.output is not None:
        changes["output"] = mask_document(outcome.output, paths["output"])
    if paths["input"] and outcome.approved_input is not None:
        changes["approved_input"] = mask_document(outcome.approved_input, paths["input"])
    return outcome.model_copy(update=changes) if changes else outcome
