"""Every character of a YAML string value is traced to where it is written in the file."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from yaml.nodes import MappingNode, ScalarNode

from signoff.manifest.positions import value_positions

_STYLES = st.sampled_from([None, '"', "'", "|", ">"])


def _dumped(value: str, style: str | None, width: int) -> str:
    class Dumper(yaml.SafeDumper):
        pass

    def represent(dumper: yaml.SafeDumper, data: str) -> Any:
        chosen = style if data == value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=chosen)

    Dumper.add_representer(str, represent)
    return yaml.dump({"spec": {"when": value}}, Dumper=Dumper, width=width, allow_unicode=True)


def _scalar(text: str) -> ScalarNode:
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    assert isinstance(root, MappingNode)
    spec = root.value[0][1]
    assert isinstance(spec, MappingNode)
    node = spec.value[0][1]
    assert isinstance(node, ScalarNode)
    return node


@settings(max_examples=400, deadline=None)
@given(value=st.text(max_size=40), style=_STYLES, width=st.sampled_from([10, 20, 80]))
def test_each_character_maps_to_where_the_file_spells_it(
    value: str, style: str | None, width: int
) -> None:
    # PyYAML chooses another style when the requested one cannot hold the value, and folds long
    # lines at ``width``: plain, quoted, escaped, folded and indented scalars all occur.
    text = _dumped(value, style, width)
    node = _scalar(text)
    assume(node.value == value)  # a few characters PyYAML itself does not round-trip

    positions = value_positions(node)

    assert positions is not None, (node.style, text)
    assert len(positions) == len(value) + 1
    lines = text.split("\n")
    for index, char in enumerate(value):
        line, column = positions[index]
        written = lines[line - 1][column - 1 : column]
        if char in " \t\n\r" or written == char:
            continue  # spaces may stand for folded line breaks and the other way round
        escaped = node.style == '"' and written == "\\"
        assert escaped, (node.style, text, index)


def test_a_block_with_an_explicit_indentation_indicator_is_mapped() -> None:
    text = "spec:\n  when: |2-\n\n     input.a\n    && input.b\n"
    node = _scalar(text)

    positions = value_positions(node)

    assert positions is not None
    assert positions[node.value.index("input.b")] == (5, 8)
