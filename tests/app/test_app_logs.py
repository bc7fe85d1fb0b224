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


@pytest.mark.parametrize("library", ["httpx", "httpx2", "openai", "aiohttp", "uvicorn.access"])
def test_library_request_chatter_stays_below_info_unless_debugging(
    library: str, restored_logging: None
) -> None:
    setup_logging("INFO")
    assert not logging.getLogger(library).isEnabledFor(logging.INFO)
    assert logging.getLogger(library).isEnabledFor(logging.WARNING)
    setup_logging("DEBUG")
    assert logging.getLogger(library).isEnabledFor(logging.DEBUG)


def test_the_last_problem_shown_by_status_names_no_chat_or_user_but_keeps_measurements() -> None:
    from chatgate.app.logs import LastProblemHandler

    handler = LastProblemHandler()
    logger = logging.getLogger("chatgate.test.last_problem")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("web client for chat %s (user %r) is not reading", "chat-4711", "alice")
        assert (
            handler.last.message
            == "WARNING chatgate.test.last_problem: web client for chat … (user …) is not reading"
        )
        logger.error("telegram chat %d: gave up after %.1fs at 100%%", 123456789, 2.5)
        assert handler.last.message is not None
        assert "123456789" not in handler.last.message
        assert handler.last.message.endswith("telegram chat …: gave up after 2.5s at 100%")
        logger.warning("store unavailable (%s)", OSError("disk full"))
        assert handler.last.message.endswith("store unavailable (disk full)")
    finally:
        logger.removeHandler(handler)


def test_the_last_problem_keeps_an_error_id_and_kind_so_status_says_what_failed() -> None:
    """Issue 31, item 5: status showed only "the agent failed: …"; the id the user was given
    and the kind of failure name no one, so they stay (the model's own text does not)."""
    from chatgate.app.logs import LastProblemHandler
    from chatgate.domain.shown import Shown

    handler = LastProblemHandler()
    logger = logging.getLogger("chatgate.test.last_problem_shown")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(
            "the agent failed [%s] (%s): %s", Shown("err-7f3a2c"), Shown("unreachable"), "host 10.0.0.5:8080"
        )
        assert handler.last.message == (
            "WARNING chatgate.test.last_problem_shown: the agent failed [err-7f3a2c] (unreachable): …"
        )
    finally:
        logger.removeHandler(handler)
