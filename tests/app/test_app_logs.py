"""JSON logs carry structured fields as keys."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from chatgate.app.logs import LIBRARY_CHATTER, JsonFormatter, TextFormatter, setup_logging


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


def test_text_lines_append_the_structured_fields_without_python_reprs() -> None:
    line = TextFormatter("%(levelname)s %(message)s").format(
        _record(session_key="agent:main:web:dm:c1", seqs=(3, 4), reason="disk full", code=None)
    )
    assert line == (
        'WARNING turn x code=null reason="disk full" seqs=[3, 4] session_key=agent:main:web:dm:c1'
    )


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """``setup_logging`` replaces the root handlers (pytest's capture among them): put them back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in LIBRARY_CHATTER}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, was in levels.items():
        logging.getLogger(name).setLevel(was)


@pytest.mark.parametrize("library", ["httpx", "openai", "aiogram", "uvicorn.access"])
def test_library_request_chatter_stays_below_info_unless_debugging(
    library: str, restored_logging: None
) -> None:
    setup_logging("INFO")
    assert not logging.getLogger(library).isEnabledFor(logging.INFO)
    assert logging.getLogger(library).isEnabledFor(logging.WARNING)
    setup_logging("DEBUG")
    assert logging.getLogger(library).isEnabledFor(logging.DEBUG)
