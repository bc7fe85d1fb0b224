"""bounded_json: every way a stranger's JSON can be bad is one short reason, never an exception
of another kind (a RecursionError escaped as a 500 with a traceback, issue 27)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatgate.domain import bounded_json
from chatgate.domain.bounded_json import BadJson, depth_of

HOSTILE = [
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100 levels"),
    (b"[" * 101 + b"]" * 101, "nested deeper than 100 levels"),
    (b'{"a": ' * 500 + b"1" + b"}" * 500, "nested deeper than 100 levels"),
    (b"\xff\xfe{}", "not UTF-8 (byte 0)"),
    (b"{not json", "not JSON: Expecting property name enclosed in double quotes at 1"),
    (b'{"n": ' + b"9" * 5000 + b"}", "a number has more than 4300 digits"),
    (b"", "not JSON: Expecting value at 0"),
]


@pytest.mark.parametrize(("raw", "reason"), HOSTILE)
def test_hostile_json_is_a_bad_json_with_a_short_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(BadJson) as caught:
        bounded_json.parse(raw)
    assert caught.value.reason == reason and len(reason) < 120


def test_json_at_the_depth_bound_is_fine_and_the_digest_ignores_spacing_and_key_order() -> None:
    assert depth_of(bounded_json.parse(b"[" * 100 + b"]" * 100)) == 100
    assert bounded_json.digest(json.loads('{"a": 1, "b": [1, 2]}')) == bounded_json.digest(
        {"b": [1, 2], "a": 1}
    )
    assert bounded_json.digest({"a": 1}) != bounded_json.digest({"a": 2})


@given(st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_parse_or_give_a_bad_json_and_nothing_else(raw: bytes) -> None:
    try:
        bounded_json.parse(raw)
    except BadJson as exc:
        assert exc.reason
