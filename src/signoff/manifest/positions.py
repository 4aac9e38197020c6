"""Where a character of a YAML scalar's value was written in the file.

An expression's offsets (a CEL syntax error, an unknown field) are offsets into the scalar's
*value*; quotes, escapes (``\\"``, ``''``), block indentation and folded line breaks move them
in the file. ``value_positions`` rebuilds the value from the file text, character by character,
and keeps it only when it equals what PyYAML read, so a position is exact or not claimed.
"""

from __future__ import annotations

from collections.abc import Callable

from yaml.nodes import ScalarNode

from signoff.manifest.source import Document, FieldPath

_DOUBLE_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85",
    "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


_Emit = Callable[[str, int], None]  # one character of the value, and where it came from


def _flow(text: str, begin: int, end: int, style: str | None) -> tuple[str, list[int]]:
    """The value of a plain or quoted scalar written in ``text[begin:end]`` (quotes excluded),
    and for each of its characters the index in ``text`` it came from."""
    chars: list[str] = []
    origin: list[int] = []

    def emit(value: str, at: int) -> None:
        chars.append(value)
        origin.append(at)

    at = begin
    while at < end:
        char = text[at]
        if char in " \t":
            at = _spaces(text, at, end, emit)
        elif char in "\r\n":
            at = _line_breaks(text, at, end, emit)
        elif style == '"' and char == "\\":
            at = _escape(text, at, end, emit)
        elif style == "'" and char == "'":
            emit("'", at)
            at += 2
        else:
            emit(char, at)
            at += 1
    return "".join(chars), origin


def _spaces(text: str, at: int, end: int, emit: _Emit) -> int:
    """Spaces and tabs: kept inside a line, folded away at its end."""
    stop = at
    while stop < end and text[stop] in " \t":
        stop += 1
    if stop < end and text[stop] in "\r\n":
        return stop  # trailing spaces of a line are folded away
    for index in range(at, stop):
        emit(text[index], index)
    return stop


def _line_breaks(text: str, at: int, end: int, emit: _Emit) -> int:
    """A run of line breaks (and the indentation after them): one reads as a space, n as n-1."""
    breaks, stop = 0, at
    while stop < end and text[stop] in " \t\r\n":
        breaks += text[stop] == "\n" or (text[stop] == "\r" and text[stop + 1] != "\n")
        stop += 1
    for _ in range(max(breaks - 1, 0)):
        emit("\n", at)
    if breaks == 1:
        emit(" ", at)
    return stop


def _escape(text: str, at: int, end: int, emit: _Emit) -> int:
    """A double-quoted scalar's escape at ``at`` (the backslash)."""
    code = text[at + 1]
    if code in "\r\n":
        at += 2 + (text[at + 1 : at + 3] == "\r\n")
        while at < end and text[at] in " \t":
            at += 1
        return at
    if code in _HEX_ESCAPES:
        digits = _HEX_ESCAPES[code]
        emit(chr(int(text[at + 2 : at + 2 + digits], 16)), at)
        return at + 2 + digits
    emit(_DOUBLE_ESCAPES.get(code, code), at)
    return at + 2


def _block_lines(text: str, begin: int, end: int) -> list[tuple[int, str]]:
    """The lines of a block scalar whose indicator is at ``text[begin]``: (start index, text)."""
    at = text.index("\n", begin) + 1
    lines: list[tuple[int, str]] = []
    while at < end:
        stop = text.find("\n", at)
        stop = end if stop < 0 or stop > end else stop
        lines.append((at, text[at:stop]))
        at = stop + 1
    return lines


def _block(lines: list[tuple[int, str]], indent: int, folded: bool) -> tuple[str, list[int]]:
    """The value of a ``|`` or ``>`` block scalar of ``lines`` with content at ``indent``."""
    chars: list[str] = []
    origin: list[int] = []
    previous: str | None = None
    pending = 0  # line breaks since the previous line with content
    for start, line in lines:
        content = line[indent:]
        if not content.strip(" \t") and len(line) <= indent:
            pending += 1
            continue
        if previous is None:
            breaks = "\n" * pending
        elif folded and previous[:1] not in (" ", "\t") and content[:1] not in (" ", "\t"):
            breaks = "\n" * pending if pending else " "
        else:
            breaks = "\n" * (pending + 1)
        chars.extend(breaks)
        origin.extend([start - 1] * len(breaks))
        chars.extend(content)
        origin.extend(range(start + indent, start + indent + len(content)))
        previous, pending = content, 0
    return "".join(chars), origin


def value_positions(node: ScalarNode) -> list[tuple[int, int]] | None:
    """The 1-based (line, column) of each character of ``node.value`` and of one past its end,
    or ``None`` when the scalar cannot be mapped exactly."""
    text = node.start_mark.buffer
    if not isinstance(text, str):
        return None
    begin, end = node.start_mark.index, node.end_mark.index
    try:
        if node.style in ("|", ">"):
            lines = _block_lines(text, begin, end)
            # The content's indentation (an explicit indicator is relative to the parent's):
            # the one whose value is what PyYAML read, deepest first.
            least = min(
                (len(ln) - len(ln.lstrip(" ")) for _, ln in lines if ln.strip(" \t")), default=0
            )
            built = (_block(lines, indent, node.style == ">") for indent in range(least, -1, -1))
            value, origin = next(
                (found for found in built if _same(found[0], node.value)), ("", [])
            )
        else:
            quoted = node.style in ("'", '"')
            value, origin = _flow(text, begin + quoted, end - quoted, node.style)
    except (ValueError, IndexError):
        return None
    if not _same(value, node.value):
        return None
    kept = len(value.rstrip("\n"))  # chomping decides the trailing line breaks
    origin = origin[:kept]
    origin += [origin[-1] + 1 if origin else begin] * (len(node.value) - kept + 1)
    starts = [0]
    starts += [index + 1 for index, char in enumerate(text) if char == "\n"]
    positions = []
    for index in origin:
        line = _line_of(starts, index)
        positions.append((line + 1, index - starts[line] + 1))
    return positions


def _same(built: str, value: str) -> bool:
    """The rebuilt value is the value read (trailing line breaks are the chomping's)."""
    return built.rstrip("\n") == value.rstrip("\n")


def _line_of(starts: list[int], index: int) -> int:
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= index:
            low = middle
        else:
            high = middle - 1
    return low


def offset_position(document: Document, path: FieldPath, offset: int) -> tuple[int, int]:
    """Where character ``offset`` of the string value at ``path`` sits in the file; the value's
    own start when that cannot be told exactly."""
    node = document.node(path)
    if not isinstance(node, ScalarNode):
        return document.position(path)
    positions = value_positions(node)
    if positions is None:
        return node.start_mark.line + 1, node.start_mark.column + 1
    return positions[min(max(offset, 0), len(positions) - 1)]


def line_column_offset(source: str, line: int, column: int) -> int:
    """The offset of 1-based ``line``/``column`` in ``source``, kept within its stripped text
    (a position past the last character, e.g. at a trailing newline, moves back to just after it)."""
    lines = source.split("\n")
    offset = sum(len(text) + 1 for text in lines[: line - 1]) + column - 1
    return min(offset, len(source.rstrip()))
