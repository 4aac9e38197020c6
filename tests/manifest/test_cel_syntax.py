"""The CEL reader finds exactly the fields an expression reads, and nothing inside its literals."""

from __future__ import annotations

import string

import cel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from signoff.manifest.cel_fields import Reference, references
from signoff.manifest.cel_syntax import Unsupported, parse, tokenize
from signoff.manifest.fields import ELEMENT, Step


def paths(source: str) -> list[tuple[str, tuple[Step, ...]]]:
    cel.compile(source)  # every case is an expression the real CEL accepts
    return [(ref.root, ref.path) for ref in references(source)]


def spelled(source: str, ref: Reference) -> list[str | None]:
    return [source[s[0] : s[1]] if s is not None else None for s in ref.spans]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("input.a.b == 1", [("input", ("a", "b"))]),
        ('input["a-b"] == 1', [("input", ("a-b",))]),
        ("input['a']['b'] == 1", [("input", ("a", "b"))]),
        ("input.items[0].sku == 'x'", [("input", ("items", 0, "sku"))]),
        ("input.items[2u].sku == 'x'", [("input", ("items", 2, "sku"))]),
        (
            "input.items[input.i].sku == 'x'",
            [("input", ("items", None, "sku")), ("input", ("i",))],
        ),
        ("(input.a).b == 1", [("input", ("a", "b"))]),
        ("(input).a == 1", [("input", ("a",))]),
        ("input.a.size() > 0 && size(input.b) > 0", [("input", ("a",)), ("input", ("b",))]),
        ("input.a ? input.b : input.c", [("input", (n,)) for n in "abc"]),
        ("!input.a || -input.n < 0", [("input", ("a",)), ("input", ("n",))]),
        ("input.a in input.b", [("input", ("a",)), ("input", ("b",))]),
        ("'billing' in principal.roles", [("principal", ("roles",))]),
        (
            "proposer.type == 'agent' && action.risk == 'high'",
            [
                ("proposer", ("type",)),
                ("action", ("risk",)),
            ],
        ),
        ("now.getHours() > 8", [("now", ())]),
        ("{'input': 1, input.k: input.v}['input'] == 1", [("input", ("k",)), ("input", ("v",))]),
        ("[input.a, input.b][0] == 1", [("input", ("a",)), ("input", ("b",))]),
        ("dyn(input).a == 1", [("input", ())]),
        ("input.a{b: input.c} == 1", [("input", ("c",))]),
        ("x.y{input: 1} == 1", []),
        ("1.5 + .5 + 1e3 + 2.5e-3 > 0.0 && 0x1F + 1 > 0 && 7u > 1u", []),
        ("1.e5 == 1", []),
    ],
)
def test_member_access_chains_rooted_at_a_variable_are_found(
    source: str, expected: list[tuple[str, tuple[Step, ...]]]
) -> None:
    assert paths(source) == expected


@pytest.mark.parametrize(
    "literal",
    [
        "'input.x'",
        '"input.x"',
        "'''input.x'''",
        '"""input.x"""',
        "'''it's input.x'''",
        '"""say "input.x" twice"""',
        "r'input.x'",
        'R"input.x\\d"',
        "b'input.x'",
        'B"input.x"',
        "br'input.x\\'",
        "BR'input.x'",
        "'\\'input.x\\''",
        '"\\"input.x"',
        "'\\\\' + 'input.x'",
        "'\\x41input.x\\u0041\\U00000041\\101\\?\\`'",
        "'// input.x'",
    ],
)
def test_field_names_inside_string_and_bytes_literals_are_not_references(literal: str) -> None:
    source = f"size({literal}) > 0 && input.real == 1"
    assert paths(source) == [("input", ("real",))]


def test_a_raw_string_ends_at_its_quote_even_after_a_backslash() -> None:
    # r"\" is a one-character string; the non-raw "\" + input.b" is one string.
    assert paths('r"\\" + input.a == ""') == [("input", ("a",))]
    assert paths('"\\" + input.b" == ""') == []


def test_comments_are_skipped() -> None:
    source = "input.a == 1 // || input.b == 2\n|| input.c == 3 // input.d"
    assert paths(source) == [("input", ("a",)), ("input", ("c",))]


def test_has_marks_its_reference_including_nested_ones() -> None:
    found = references("has(input.a.b) && has(input.c) && input.d == 1")
    assert [(ref.path, ref.in_has) for ref in found] == [
        (("a", "b"), True),
        (("c",), True),
        (("d",), False),
    ]


def test_a_macro_variable_reads_the_elements_of_its_range_not_the_root() -> None:
    source = "input.items.exists(x, x.b > 1 && x.c.d == 'e')"
    found = references(source)

    assert [(ref.root, ref.path, ref.written) for ref in found] == [
        ("input", ("items",), "input"),
        ("input", ("items", ELEMENT, "b"), "x"),
        ("input", ("items", ELEMENT, "c", "d"), "x"),
    ]
    assert spelled(source, found[1]) == [None, None, "b"]
    assert found[2].text(3) == "x.c.d"


def test_a_macro_variable_named_like_a_root_variable_shadows_it() -> None:
    found = references("input.items.exists(input, input.sku == 1) && input.sku == 0")

    assert [ref.path for ref in found] == [
        ("items",),
        ("items", ELEMENT, "sku"),
        ("sku",),
    ]


def test_nested_macros_and_filter_keep_their_elements() -> None:
    source = (
        "input.orders.all(o, o.lines.exists(l, l.sku == o.id)) && "
        "input.items.filter(i, i.qty > 1).all(j, j.sku != '')"
    )
    assert paths(source) == [
        ("input", ("orders",)),
        ("input", ("orders", ELEMENT, "lines")),
        ("input", ("orders", ELEMENT, "lines", ELEMENT, "sku")),
        ("input", ("orders", ELEMENT, "id")),
        ("input", ("items",)),
        ("input", ("items", ELEMENT, "qty")),
        ("input", ("items", ELEMENT, "sku")),
    ]


@pytest.mark.parametrize(
    "source",
    [
        "[1, 2].exists(x, x.b > 1)",  # a literal's elements: nothing to resolve
        "input.items.map(x, x.n).exists(y, y.z == 1)",  # map's results: not known
        "input.items.map(x, x.n > 0, x.n).size() > 0",
    ],
)
def test_macro_variables_over_unknown_ranges_are_not_resolved(source: str) -> None:
    assert all(ref.path in (("items",), ("items", ELEMENT, "n")) for ref in references(source))
    assert all(ref.written != "y" for ref in references(source))


def test_two_variable_comprehensions_bind_both_names_to_nothing_known() -> None:
    # cel-go's two-variable forms: neither i nor v is resolved against input.
    assert paths("input.m.all(i, v, v.x > i)") == [("input", ("m",))]


def test_the_position_of_each_step_is_where_it_is_written() -> None:
    source = "  input .  items [ 0 ] . sku == 'a' && input['prio'] == 1"
    first, second = references(source)

    assert spelled(source, first) == ["items", "0", "sku"]
    assert spelled(source, second) == ["'prio'"]


@pytest.mark.parametrize(
    "source",
    ["input.`a-b`", "input.?a", "input[?'a']", "'unterminated", "input..a", "a @ b", "'\\q'"],
)
def test_text_the_reader_does_not_understand_yields_no_references(source: str) -> None:
    with pytest.raises(Unsupported):
        parse(source)
    assert references(source) == []


_TEXT = st.text(alphabet=string.printable + "éü€", max_size=30)


def _escaped(text: str, quote: str) -> str:
    out = []
    for char in text:
        if char in ("\\", quote):
            out.append("\\" + char)
        elif char in "\r\n\t\x0b\x0c":
            out.append({"\r": "\\r", "\n": "\\n", "\t": "\\t", "\x0b": "\\v", "\x0c": "\\f"}[char])
        else:
            out.append(char)
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(text=_TEXT, quote=st.sampled_from(["'", '"']), triple=st.booleans())
def test_any_string_literal_reads_as_the_real_cel_reads_it(
    text: str, quote: str, triple: bool
) -> None:
    body = _escaped(text, quote)
    literal = quote * 3 + body + quote * 3 if triple else quote + body + quote
    source = f"{literal} == input.a"

    assert cel.compile(literal).execute() == text
    token = tokenize(source)[0]
    assert (token.kind, token.value, token.end) == ("string", text, len(literal))
    assert paths(source) == [("input", ("a",))]
