"""How a run reads to an approver: masked input, who proposed it, age and expiry.

Display only. Which runs an approver is *shown* is a filter for convenience (their tenant, a role
the approval names, not their own proposal); whether a decision counts is always
``Runtime.decide``'s call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from signoff.core import substance
from signoff.core.approvals import approver_refusal, is_overdue
from signoff.core.codes import CODE_DESCRIPTIONS, Code
from signoff.core.definition import ActionDefinition, FieldDisplay
from signoff.core.input_limits import is_plain_text
from signoff.core.run import ActionRun, RunStatus
from signoff.core.runtime import Runtime
from signoff.core.visibility import (
    MASK,
    mask_document,
    masked_run,
    sensitive_paths,
)
from signoff.surfaces.access.caller import Caller
from signoff.surfaces.web.display import shown
from signoff.surfaces.web.reasons import approval_reason

_PAGE = 200
_MAX_PAGES = 10


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    value: str
    masked: bool
    hidden_characters: bool = False
    """The raw value holds control, bidi or zero-width characters (shown as ``⟨U+202E⟩``)."""


def visible(text: str) -> tuple[str, bool]:
    """``text`` with every control, bidi and zero-width character shown as ``⟨U+XXXX⟩``, and
    whether there was one: what an approver reads is what the executor receives."""
    if is_plain_text(text):
        return text, False
    return "".join(char if is_plain_text(char) else f"⟨U+{ord(char):04X}⟩" for char in text), True


def _definition(runtime: Runtime, run: ActionRun) -> ActionDefinition | None:
    action = runtime.action(run.action_id)
    return action.definition if action is not None else None


def masked_input(runtime: Runtime, run: ActionRun) -> dict[str, Any]:
    """The input that **will run** (``substance.will_run``: amended values included), with the
    values its action marks sensitive replaced by a mask: what every approver surface shows."""
    return dict(substance.will_run(masked_run(run, _definition(runtime, run))))


def proposed_input(runtime: Runtime, run: ActionRun) -> dict[str, Any]:
    """The input as proposed (before any amendment), masked like ``masked_input``."""
    return dict(substance.of(masked_run(run, _definition(runtime, run))).proposed)


def _display(runtime: Runtime, run: ActionRun) -> Mapping[str, FieldDisplay]:
    action = runtime.action(run.action_id)
    return action.definition.display if action is not None else {}


def _field(name: str, value: Any, display: FieldDisplay | None) -> Field:
    shown_name, odd_name = visible(name)
    if value == MASK:
        return Field(name=shown_name, value=MASK, masked=True, hidden_characters=odd_name)
    text, odd_value = visible(shown(value, display))
    return Field(name=shown_name, value=text, masked=False, hidden_characters=odd_name or odd_value)


def input_fields(runtime: Runtime, run: ActionRun) -> list[Field]:
    """The input that will run as approvers read it: sensitive values masked, the rest
    formatted as declared."""
    display = _display(runtime, run)
    return [
        _field(key, value, display.get(key)) for key, value in masked_input(runtime, run).items()
    ]


@dataclass(frozen=True, slots=True)
class Change:
    """One field an amendment changed: its value before and after, as approvers read them."""

    name: str
    before: Field
    after: Field


@dataclass(frozen=True, slots=True)
class AmendmentView:
    """One amendment on the record: who changed which fields from what to what, when, at which
    run version."""

    approver_id: str
    at: datetime
    version: int | None
    changes: tuple[Change, ...]

    @property
    def summary(self) -> str:
        """``amount 12,000.00 EUR → 19,900.00 EUR; reason … → …`` (plain text: Slack, CLI)."""
        return "; ".join(f"{c.name} {c.before.value} → {c.after.value}" for c in self.changes)


def amendment_views(runtime: Runtime, run: ActionRun) -> list[AmendmentView]:
    """The amendment record (``substance.of(run).amendments``) as every surface shows it."""
    display = _display(runtime, run)
    views: list[AmendmentView] = []
    for record in substance.of(masked_run(run, _definition(runtime, run))).amendments:
        changes = tuple(
            Change(
                name=visible(name)[0],
                before=_field(name, record.previous.get(name), display.get(name)),
                after=_field(name, value, display.get(name)),
            )
            for name, value in record.changes.items()
        )
        views.append(
            AmendmentView(visible(record.approver_id)[0], record.at, record.version, changes)
        )
    return views


@dataclass(frozen=True, slots=True)
class ActionFacts:
    """What an approver is told about the action a run asks for."""

    title: str
    risk: str
    effect: str


def action_facts(runtime: Runtime, run: ActionRun) -> ActionFacts:
    action = runtime.action(run.action_id)
    if action is None:
        return ActionFacts(title=run.action_id, risk="?", effect="?")
    definition = action.definition
    return ActionFacts(
        title=definition.title or run.action_id,
        risk=str(definition.risk),
        effect=str(definition.effect),
    )


def row_matches(row: Mapping[str, Any], action: str, query: str) -> bool:
    """The inbox filter: the action (exact) and a case-blind search over what the row shows.

    Masked fields are never searched, so a search can never probe a sensitive value."""
    if action and row["action"] != action:
        return False
    if not query:
        return True
    needle = query.casefold()
    visible = [row["action"], row["title"], row["principal"], row["resource"]]
    visible += [f.value for f in row["fields"] if not f.masked]
    return any(needle in str(text).casefold() for text in visible)


def now(runtime: Runtime) -> datetime:
    return runtime.now()


def may_decide(run: ActionRun, caller: Caller) -> bool:
    """Display hint: pending, and the runtime's approver rule lets ``caller`` decide it now."""
    return (
        run.status is RunStatus.WAITING_APPROVAL and approver_refusal(run, caller.principal) is None
    )


def is_candidate(run: ActionRun, caller: Caller) -> bool:
    """Shown in the inbox: the caller is eligible, whether or not they decided already."""
    return approver_refusal(run, caller.principal) in (None, Code.APPROVAL_ALREADY_DECIDED)


@dataclass(frozen=True, slots=True)
class Pending:
    """One page of waiting runs, oldest first; ``next_after`` continues (``None``: no more)."""

    runs: list[ActionRun]
    next_after: str | None


async def pending_page(
    runtime: Runtime,
    tenant_id: str,
    caller: Caller | None = None,
    limit: int = 100,
    after: str | None = None,
) -> Pending:
    """Waiting runs of the tenant, **oldest first** (a flood of new requests never hides an older
    one): with ``caller``, only those it could decide. Scans at most ``_MAX_PAGES`` store pages
    per call; ``next_after`` resumes where it stopped.

    Overdue ones are left out (the sweeper or the next read expires them)."""
    now = runtime.now()
    found: list[ActionRun] = []
    cursor = after
    for _ in range(_MAX_PAGES):
        page = await runtime.list_runs(
            tenant_id,
            statuses=[RunStatus.WAITING_APPROVAL],
            limit=_PAGE,
            after_run_id=cursor,
            oldest_first=True,
        )
        for run in page:
            cursor = run.run_id
            if run.tenant_id != tenant_id or (caller is not None and not is_candidate(run, caller)):
                continue
            if is_overdue(run, now):
                continue
            found.append(run)
            if len(found) >= limit:
                return Pending(found, cursor)
        if len(page) < _PAGE:
            return Pending(found, None)
    return Pending(found, cursor)


async def pending_for(
    runtime: Runtime, tenant_id: str, caller: Caller | None = None, limit: int = 100
) -> list[ActionRun]:
    """The first page of ``pending_page``."""
    return (await pending_page(runtime, tenant_id, caller, limit)).runs


def preview_fields(runtime: Runtime, run: ActionRun) -> list[Field]:
    """What the preview (dry run) returned, as name/value pairs for the approvers' pages: values
    formatted like the input field of the same name, sensitive ones (the action's sensitive output
    paths, or an input field marked sensitive under the same name) masked."""
    if run.preview is None:
        return []
    definition = _definition(runtime, run)
    paths = sensitive_paths(definition)
    secret = [*paths["output"], *(path for path in paths["input"] if len(path) == 1)]
    output = mask_document(dict(run.preview.output), secret)
    display = {**definition.display, **definition.preview_display} if definition else {}
    fields: list[Field] = []
    for key, value in output.items():
        name, odd_name = visible(key)
        if value == MASK:
            fields.append(Field(name=name, value=MASK, masked=True, hidden_characters=odd_name))
            continue
        text, odd_value = visible(shown(value, display.get(key)))
        fields.append(
            Field(name=name, value=text, masked=False, hidden_characters=odd_name or odd_value)
        )
    return fields


def amendable_fields(runtime: Runtime, run: ActionRun) -> list[dict[str, Any]]:
    """The fields an approver may amend, with their current (approved or proposed) values and the
    schema type the form coerces to."""
    action = runtime.action(run.action_id)
    if action is None:
        return []
    properties = action.definition.input_schema.get("properties", {})
    current = substance.will_run(run)
    fields: list[dict[str, Any]] = []
    for name in action.definition.approval.amend:
        schema = properties.get(name, {}) if isinstance(properties, dict) else {}
        kind = schema.get("type", "string") if isinstance(schema, dict) else "string"
        value = current.get(name)
        fields.append(
            {
                "name": name,
                "type": kind if isinstance(kind, str) else "string",
                "value": ""
                if value is None
                else (value if isinstance(value, str) else shown(value, None)),
            }
        )
    return fields


def coerce_amendments(runtime: Runtime, run: ActionRun, form: Mapping[str, str]) -> dict[str, Any]:
    """A form's ``amend.<field>`` values typed as the input schema declares; unchanged ones left
    out. A value that is not of its type is passed on as text, so validation names it."""
    changes: dict[str, Any] = {}
    for field in amendable_fields(runtime, run):
        raw = form.get(f"amend.{field['name']}")
        if raw is None or raw.strip() == str(field["value"]).strip():
            continue
        text = raw.strip()
        value: Any = text
        try:
            if field["type"] == "integer":
                value = int(text)
            elif field["type"] == "number":
                value = float(text) if any(c in text for c in ".eE") else int(text)
            elif field["type"] == "boolean" and text in ("true", "false"):
                value = text == "true"
        except ValueError:
            value = text
        changes[field["name"]] = value
    return changes


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def relative(moment: datetime | None, now: datetime) -> str:
    """``5 min ago`` / ``in 3 h`` — rough on purpose; the exact time is in the ``<time>`` tag."""
    if moment is None:
        return "never"
    delta = moment - now
    future = delta > timedelta(0)
    size = abs(delta)
    if size < timedelta(minutes=1):
        text = f"{int(size.total_seconds())} s"
    elif size < timedelta(hours=1):
        text = f"{int(size.total_seconds() // 60)} min"
    elif size < timedelta(days=2):
        text = f"{int(size.total_seconds() // 3600)} h"
    else:
        text = f"{size.days} days"
    return f"in {text}" if future else f"{text} ago"


def describe(code: str) -> str:
    """The catalog's sentence for a code (domain codes have none)."""
    try:
        return CODE_DESCRIPTIONS[Code(code)]
    except ValueError:
        return ""


__all__ = [
    "MASK",
    "ActionFacts",
    "AmendmentView",
    "Change",
    "Field",
    "Pending",
    "action_facts",
    "amendable_fields",
    "amendment_views",
    "approval_reason",
    "coerce_amendments",
    "describe",
    "input_fields",
    "is_candidate",
    "iso",
    "masked_input",
    "may_decide",
    "now",
    "pending_for",
    "pending_page",
    "preview_fields",
    "proposed_input",
    "relative",
    "row_matches",
    "visible",
]
