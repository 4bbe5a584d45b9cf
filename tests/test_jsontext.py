"""The store's JSON text is exactly what ``json.dumps`` writes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sa_core.jsontext import dumps, dumps_compact

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(values)
def test_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    assert dumps(value) == json.dumps(value)


@given(values)
def test_dumps_compact_writes_compact_unescaped_json(value: Any) -> None:
    assert dumps_compact(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_keys_that_are_not_strings_are_written_as_json_dumps_writes_them() -> None:
    value = {1: "a", 2.5: "b", None: "c", False: "d"}
    assert dumps(value) == json.dumps(value)


def test_a_value_json_cannot_hold_is_refused_with_its_type_named() -> None:
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        dumps({"x": object()})
