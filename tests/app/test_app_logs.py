"""JSON logs carry structured fields as keys."""

from __future__ import annotations

import json
import logging

from chatgate.app.logs import JsonFormatter, TextFormatter


def _record(**extra: object) -> logging.LogRecord:
    record = logging.makeLogRecord(
        {"name": "chatgate.test", "levelname": "WARNING", "msg": "turn %s", "args": ("x",)}
    )
    record.__dict__.update(extra)
    return record


def test_json_lines_carry_the_session_key_and_event_ids() -> None:
    line = JsonFormatter().format(_record(session_key="agent:main:web:dm:c1", seqs=(3, 4)))
    entry = json.loads(line)
    assert entry["message"] == "turn x"
    assert entry["session_key"] == "agent:main:web:dm:c1"
    assert entry["seqs"] == [3, 4]
    assert entry["level"] == "WARNING"


def test_text_lines_append_the_structured_fields() -> None:
    line = TextFormatter("%(levelname)s %(message)s").format(_record(session_key="k1"))
    assert line == "WARNING turn x session_key='k1'"
