"""An approval rule in words, for the people who decide: never its CEL.

A manifest may say why approval is needed (``approval.explain``, ``escalate[].explain``). When it
does not, the sentence is derived from the rule: comparisons of an input field with a literal,
joined by ``&&`` and ``||``, read as ``amount is more than 1,000.00 EUR and country is "DE"``
(values formatted as the action displays them); any other rule reads as the fields it looks at
(``a rule on amount and country matched``), and a rule that reads no input field as the action's
own rule matching. The derivation never fails: text this module does not understand falls back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from signoff.manifest.cel_fields import references
from signoff.manifest.cel_syntax import Token, Unsupported, tokenize

# How a comparison reads; the operator is the one between ``input.field`` and the literal.
_RELATION_WORDS = {
    "==": "is",
    "!=": "is not",
    ">": "is more than",
    ">=": "is at least",
    "<": "is less than",
    "<=": "is at most",
}
# The same comparison written literal-first (``1000 < input.amount``), read field-first.
_MIRRORED = {"==": "==", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}
_JOINERS = {"&&": "and", "||": "or"}
_LITERALS = ("int", "uint", "float", "string")

Formatter = Callable[[str, Any], str]
"""How a literal compared with input field ``name`` reads (the action's display format)."""


def _field(tokens: list[Token], at: int) -> tuple[str, int] | None:
    """``input.a.b`` starting at ``at``: its dotted name and the index after it."""
    if not (tokens[at].kind == "ident" and tokens[at].text == "input"):
        return None
    names: list[str] = []
    at += 1
    while tokens[at].kind == "op" and tokens[at].text == "." and tokens[at + 1].kind == "ident":
        names.append(tokens[at + 1].text)
        at += 2
    if tokens[at].kind == "op" and tokens[at].text in (".", "[", "("):
        return None  # an index, a call or a method: not a plain field
    return (".".join(names), at) if names else None


def _relation(token: Token) -> str | None:
    return token.text if token.kind == "op" and token.text in _RELATION_WORDS else None


def _comparison(tokens: list[Token], at: int, fmt: Formatter) -> tuple[str, int] | None:
    """One ``input.f OP literal`` (either way round) at ``at``, in words, and the index after it."""
    found = _field(tokens, at)
    if found is not None:
        name, at = found
        operator, literal = _relation(tokens[at]), tokens[at + 1]
        if operator is None or literal.kind not in _LITERALS:
            return None
        return f"{name} {_RELATION_WORDS[operator]} {fmt(name, literal.value)}", at + 2
    literal, operator = tokens[at], _relation(tokens[at + 1]) if at + 1 < len(tokens) else None
    if literal.kind not in _LITERALS or operator is None:
        return None
    found = _field(tokens, at + 2)
    if found is None:
        return None
    name, after = found
    return f"{name} {_RELATION_WORDS[_MIRRORED[operator]]} {fmt(name, literal.value)}", after


def _comparisons(source: str, fmt: Formatter) -> str | None:
    """``source`` as comparisons joined by and/or, or ``None`` when it is anything else."""
    try:
        tokens = tokenize(source)
    except Unsupported:
        return None
    words: list[str] = []
    at = 0
    while True:
        found = _comparison(tokens, at, fmt)
        if found is None:
            return None
        phrase, at = found
        words.append(phrase)
        token = tokens[at]
        if token.kind == "end":
            joiners = {word for word in words[1::2]}
            return " ".join(words) if len(joiners) <= 1 else None  # a mix reads ambiguously
        if token.kind != "op" or token.text not in _JOINERS:
            return None
        words.append(_JOINERS[token.text])
        at += 1


def plain(name: str, value: Any) -> str:
    """A literal read without a display format: numbers with thousands separators."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    if isinstance(value, int | float):
        return f"{value:,}"
    return str(value)


def rule_in_words(source: str, fmt: Formatter = plain) -> str:
    """What the CEL rule ``source`` asks about, as a clause: ``amount is more than 1,000``."""
    compared = _comparisons(source, fmt)
    if compared is not None:
        return compared
    fields = sorted(
        {
            ".".join(str(step) for step in reference.path if isinstance(step, str))
            for reference in references(source)
            if reference.root == "input"
        }
        - {""}
    )
    if not fields:
        return "the action's approval rule matched"
    listed = fields[0] if len(fields) == 1 else ", ".join(fields[:-1]) + " and " + fields[-1]
    return f"a rule on {listed} matched"
