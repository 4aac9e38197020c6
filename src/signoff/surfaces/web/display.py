"""How approvers' screens show input values: amounts with their currency, dates readably.

Display only: the stored and executed input never changes. A value that does not fit its
declared format (a string where money was declared) is shown as it is, never hidden.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from signoff.core.definition import DisplayFormat, FieldDisplay


def shown(value: Any, display: FieldDisplay | None) -> str:
    """``value`` as an approver should read it."""
    if display is not None:
        formatted = _formatted(value, display)
        if formatted is not None:
            return formatted
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))  # 4200.0 reads as 4200
    return json.dumps(value, ensure_ascii=False)


def _formatted(value: Any, display: FieldDisplay) -> str | None:
    kind = display.format
    if kind in (DisplayFormat.MONEY, DisplayFormat.NUMBER, DisplayFormat.PERCENT):
        number = _decimal(value)
        if number is None:
            return None
        if kind is DisplayFormat.PERCENT:
            return f"{number.normalize():f} %"
        if kind is DisplayFormat.NUMBER:
            return f"{number:,}"
        if display.minor_units:
            number = number / 100
        return f"{number:,.2f} {display.currency or ''}".rstrip()
    if not isinstance(value, str):
        return None
    try:
        if kind is DisplayFormat.DATE:
            return date.fromisoformat(value).strftime("%-d %b %Y")
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    zone = moment.tzname() or ""
    return f"{moment.strftime('%-d %b %Y, %H:%M')} {zone}".rstrip()


def _decimal(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        return None
    return number if number.is_finite() else None
