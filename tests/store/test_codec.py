"""JSON columns: the text both backends store, and what reads it back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatgate.store.codec import dumps, loads


def _stdlib(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@pytest.mark.parametrize(
    "value",
    [
        {
            "text": 'héllo 😀 \u2028 \x00\x1f "quoted" back\\slash',
            "b": [1, 2.5, None, True],
            "a": {"z": 1, "y": ()},
        },
        {"source": {"platform": "discord", "chat_id": "223456789012345678", "thread_id": None}},
        {"counts": {1: "one", 2: "two"}},  # int keys: only json sorts them, so it writes these
        [],
    ],
)
def test_a_column_is_written_as_the_standard_library_writes_it_and_reads_back(value: Any) -> None:
    text = dumps(value)
    assert text == _stdlib(value)
    assert loads(text) == json.loads(text)


def test_a_value_json_cannot_store_is_refused_with_a_type_error() -> None:
    with pytest.raises(TypeError):
        dumps({"when": object()})
