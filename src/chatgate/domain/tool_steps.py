"""A reply's tool steps (name, arguments in short, outcome), kept with the reply it led to.

The steps are part of the conversation: the turn records them in its final's outbox target
(``STEPS_KEY``, a JSON string like the usage), so a reload or another device shows what the
agent did, not only the browser that watched it happen. Bounded: a stranger's agent run can
call tools without end, the record keeps the first ``MAX_STEPS``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec.structs import asdict

STEPS_KEY = "steps"
"""Outbox target key of a final's tool steps (``dumps``), read back by the web chat's history."""
MAX_STEPS = 50
MAX_FIELD = 200
OUTCOMES = ("done", "declined", "failed")


class ToolStep(msgspec.Struct):
    name: str
    detail: str = ""
    outcome: str | None = None
    """``done``, ``declined`` or ``failed``; ``None`` when the turn ended before the result."""


def dumps(steps: list[ToolStep]) -> str:
    return json.dumps([asdict(s) for s in steps[:MAX_STEPS]], ensure_ascii=False, separators=(",", ":"))


def steps_of(target: Mapping[str, Any]) -> tuple[ToolStep, ...]:
    """The steps a final's target records; () for none or for a record that does not parse."""
    raw = target.get(STEPS_KEY)
    if not isinstance(raw, str):
        return ()
    try:
        data = json.loads(raw)
    except ValueError:
        return ()
    if not isinstance(data, list):
        return ()
    steps = []
    for item in data[:MAX_STEPS]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        detail = item.get("detail") if isinstance(item.get("detail"), str) else ""
        outcome = item.get("outcome") if item.get("outcome") in OUTCOMES else None
        steps.append(ToolStep(item["name"][:MAX_FIELD], str(detail)[:MAX_FIELD], outcome))
    return tuple(steps)


def as_json(steps: tuple[ToolStep, ...]) -> list[dict[str, Any]]:
    """The steps as the page reads them (no outcome key while none was seen)."""
    return [{k: v for k, v in asdict(s).items() if v is not None} for s in steps]
