"""A CEL lexer and parser for static checks: which fields an expression reads, and where.

The ``cel`` binding compiles and evaluates but exposes no syntax tree (only the names of the
variables an expression uses), so ``signoff check`` parses expressions itself to find every
member access (``input.a.b``, ``input["a"]``, ``has(input.a)``) with its offset in the source.

Only expressions the binding already compiled are parsed here. Anything this parser does not
understand raises ``Unsupported`` and the caller skips the field checks of that expression: a
construct this parser does not know never becomes a false error.

The grammar is cel-spec's (``Expr``, ``ConditionalOr`` ... ``Member``, ``Primary``): string and
bytes literals in every quote form (``'`` ``"`` ``'''`` ``\"\"\"``, raw ``r``/``R``, bytes ``b``/``B``,
with all escapes), ``//`` comments, int/uint/float/hex numbers, lists, maps, message literals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_WHITESPACE = " \t\n\r\f"
_IDENT_START = "_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_IDENT_REST = _IDENT_START + "0123456789"
_HEX = "0123456789abcdefABCDEF"
_OPERATORS = ("==", "!=", "<=", ">=", "&&", "||", *"<>!+-*/%?:.,()[]{}")
_STRING_PREFIXES = frozenset({"r", "R", "b", "B", "br", "bR", "Br", "BR"})
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
}  # fmt: skip
_RELATIONS = frozenset({"<", "<=", ">=", ">", "==", "!=", "in"})
_LITERAL_WORDS = {"true": True, "false": False, "null": None}


class Unsupported(ValueError):
    """Text this parser does not understand (the field checks of the expression are skipped)."""


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # ident, int, uint, float, string, bytes, op, end
    text: str
    start: int
    end: int
    value: Any = None


def _string(source: str, start: int, prefix: str) -> Token:
    """The string or bytes literal whose prefix starts at ``start``."""
    raw = "r" in prefix.lower()
    at = start + len(prefix)
    quote = source[at]
    delimiter = quote * 3 if source.startswith(quote * 3, at) else quote
    at += len(delimiter)
    chars: list[str] = []
    while True:
        if at >= len(source):
            raise Unsupported("unterminated string")
        if source.startswith(delimiter, at):
            at += len(delimiter)
            break
        char = source[at]
        if len(delimiter) == 1 and char in "\r\n":
            raise Unsupported("a line break in a single-quoted string")
        if char == "\\" and not raw:
            decoded, at = _escape(source, at)
            chars.append(decoded)
            continue
        chars.append(char)
        at += 1
    kind = "bytes" if "b" in prefix.lower() else "string"
    return Token(kind, source[start:at], start, at, "".join(chars))


def _escape(source: str, at: int) -> tuple[str, int]:
    """The character the escape sequence at ``at`` (a backslash) stands for, and where it ends."""
    code = source[at + 1 : at + 2]
    if code in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[code], at + 2
    digits = {"x": 2, "X": 2, "u": 4, "U": 8}.get(code)
    if digits is not None:
        text = source[at + 2 : at + 2 + digits]
        if len(text) != digits or any(c not in _HEX for c in text):
            raise Unsupported("a bad escape")
        return chr(int(text, 16)), at + 2 + digits
    text = source[at + 1 : at + 4]
    if len(text) == 3 and text[0] in "0123" and all(c in "01234567" for c in text[1:]):
        return chr(int(text, 8)), at + 4
    raise Unsupported("a bad escape")


def _number(source: str, start: int) -> Token:
    at = start
    if source.startswith(("0x", "0X"), at) and source[at + 2 : at + 3] in tuple(_HEX):
        at += 2
        while at < len(source) and source[at] in _HEX:
            at += 1
        value = int(source[start + 2 : at], 16)
        if source[at : at + 1] in ("u", "U"):
            return Token("uint", source[start : at + 1], start, at + 1, value)
        return Token("int", source[start:at], start, at, value)
    while at < len(source) and source[at].isdigit():
        at += 1
    is_float = False
    if source[at : at + 1] == "." and source[at + 1 : at + 2].isdigit():
        is_float = True
        at += 1
        while at < len(source) and source[at].isdigit():
            at += 1
    exponent = at
    if source[exponent : exponent + 1] in ("e", "E"):
        exponent += 1
        if source[exponent : exponent + 1] in ("+", "-"):
            exponent += 1
        if source[exponent : exponent + 1].isdigit():
            is_float = True
            at = exponent
            while at < len(source) and source[at].isdigit():
                at += 1
    text = source[start:at]
    if is_float:
        return Token("float", text, start, at, float(text))
    if source[at : at + 1] in ("u", "U"):
        return Token("uint", source[start : at + 1], start, at + 1, int(text))
    return Token("int", text, start, at, int(text))


def tokenize(source: str) -> list[Token]:
    """Every token of ``source``, ending with an ``end`` token; comments and spaces dropped."""
    tokens: list[Token] = []
    at = 0
    while at < len(source):
        char = source[at]
        if char in _WHITESPACE:
            at += 1
        elif source.startswith("//", at):
            newline = source.find("\n", at)
            at = len(source) if newline < 0 else newline
        elif char in _IDENT_START:
            end = at
            while end < len(source) and source[end] in _IDENT_REST:
                end += 1
            word = source[at:end]
            if word in _STRING_PREFIXES and source[end : end + 1] in ("'", '"'):
                tokens.append(_string(source, at, word))
                at = tokens[-1].end
            else:
                tokens.append(Token("ident", word, at, end))
                at = end
        elif char in ("'", '"'):
            tokens.append(_string(source, at, ""))
            at = tokens[-1].end
        elif char.isdigit() or (char == "." and source[at + 1 : at + 2].isdigit()):
            tokens.append(_number(source, at))
            at = tokens[-1].end
        else:
            operator = next((op for op in _OPERATORS if source.startswith(op, at)), None)
            if operator is None:
                raise Unsupported(f"unexpected {char!r}")
            tokens.append(Token("op", operator, at, at + len(operator)))
            at += len(operator)
    tokens.append(Token("end", "", len(source), len(source)))
    return tokens


@dataclass(frozen=True, slots=True)
class Node:
    """An expression. ``children`` are its sub-expressions in source order."""

    start: int
    end: int
    children: tuple[Node, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class Ident(Node):
    name: str = ""


@dataclass(frozen=True, slots=True)
class Literal(Node):
    kind: str = ""
    value: Any = None


@dataclass(frozen=True, slots=True)
class Select(Node):
    """``operand.name``; ``start``/``end`` are those of ``name``."""

    operand: Node | None = None
    name: str = ""


@dataclass(frozen=True, slots=True)
class Index(Node):
    """``operand[key]``; ``start``/``end`` are those of ``key``."""

    operand: Node | None = None
    key: Node | None = None


@dataclass(frozen=True, slots=True)
class Call(Node):
    """``name(args)`` or ``target.name(args)``; ``start``/``end`` are those of ``name``."""

    target: Node | None = None
    name: str = ""
    args: tuple[Node, ...] = ()


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens = tokenize(source)
        self.at = 0

    @property
    def token(self) -> Token:
        return self.tokens[self.at]

    def take(self, *texts: str) -> Token | None:
        token = self.token
        if token.kind in ("op", "ident") and token.text in texts:
            self.at += 1
            return token
        return None

    def expect(self, text: str) -> Token:
        token = self.take(text)
        if token is None:
            raise Unsupported(f"expected {text!r} at offset {self.token.start}")
        return token

    def ident(self) -> Token:
        token = self.token
        if token.kind != "ident" or token.text in _LITERAL_WORDS or token.text == "in":
            raise Unsupported(f"expected a name at offset {token.start}")
        self.at += 1
        return token

    def parse(self) -> Node:
        node = self.expression()
        if self.token.kind != "end":
            raise Unsupported(f"unexpected {self.token.text!r} at offset {self.token.start}")
        return node

    def expression(self) -> Node:
        condition = self.binary(0)
        if self.take("?") is None:
            return condition
        then = self.binary(0)
        self.expect(":")
        otherwise = self.expression()
        return Node(condition.start, otherwise.end, (condition, then, otherwise))

    _LEVELS: tuple[frozenset[str], ...] = (
        frozenset({"||"}),
        frozenset({"&&"}),
        _RELATIONS,
        frozenset({"+", "-"}),
        frozenset({"*", "/", "%"}),
    )

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.take(*self._LEVELS[level]) is not None:
            right = self.binary(level + 1)
            left = Node(left.start, right.end, (left, right))
        return left

    def unary(self) -> Node:
        operator = self.take("!", "-")
        if operator is None:
            return self.member()
        operand = self.unary()
        return Node(operator.start, operand.end, (operand,))

    def arguments(self, close: str) -> tuple[Node, ...]:
        args: list[Node] = []
        while self.take(close) is None:
            args.append(self.expression())
            if self.take(",") is None:
                self.expect(close)
                break
        return tuple(args)

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.take(".") is not None:
                name = self.ident()
                if self.take("(") is not None:
                    args = self.arguments(")")
                    node = Call(name.start, name.end, (node, *args), node, name.text, args)
                else:
                    node = Select(name.start, name.end, (node,), node, name.text)
            elif self.take("[") is not None:
                key = self.expression()
                self.expect("]")
                node = Index(key.start, key.end, (node, key), node, key)
            elif self.token.text == "{" and self.token.kind == "op" and _qualified(node):
                self.at += 1
                values = self.entries(fields=True)
                node = Node(node.start, self.tokens[self.at - 1].end, values)
            else:
                return node

    def entries(self, *, fields: bool) -> tuple[Node, ...]:
        """Map entries (``key: value``) or message fields (``name: value``) up to ``}``."""
        found: list[Node] = []
        while self.take("}") is None:
            if fields:
                self.ident()
            else:
                found.append(self.expression())
            self.expect(":")
            found.append(self.expression())
            if self.take(",") is None:
                self.expect("}")
                break
        return tuple(found)

    def primary(self) -> Node:
        token = self.token
        if token.kind in ("int", "uint", "float", "string", "bytes"):
            self.at += 1
            return Literal(token.start, token.end, (), token.kind, token.value)
        if token.kind == "ident" and token.text in _LITERAL_WORDS:
            self.at += 1
            return Literal(token.start, token.end, (), "word", _LITERAL_WORDS[token.text])
        if self.take("(") is not None:
            inner = self.expression()
            self.expect(")")
            return inner
        if self.take("[") is not None:
            items = self.arguments("]")
            return Node(token.start, self.tokens[self.at - 1].end, items)
        if self.take("{") is not None:
            entries = self.entries(fields=False)
            return Node(token.start, self.tokens[self.at - 1].end, entries)
        dot = "." if self.take(".") is not None else ""  # a name from the root scope
        name = self.ident()
        if self.take("(") is not None:
            args = self.arguments(")")
            return Call(name.start, name.end, args, None, dot + name.text, args)
        return Ident(name.start, name.end, (), dot + name.text)


def _qualified(node: Node) -> bool:
    """``a.b.c`` written as names only: the type of a message literal ``a.b.c{f: 1}``."""
    while isinstance(node, Select):
        assert node.operand is not None
        node = node.operand
    return isinstance(node, Ident)


def parse(source: str) -> Node:
    """The syntax tree of ``source``; raises ``Unsupported`` for anything it does not understand."""
    return _Parser(source).parse()
