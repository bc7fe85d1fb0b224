"""Logging: readable lines by default, JSON lines with ``--log-format json``.

Structured fields passed with ``extra=`` (session_key, seqs, platform, code...)
are appended to text lines and become keys of JSON lines.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import sys
import time
from dataclasses import dataclass
from typing import Literal

from chatgate.domain.log_budget import SUMMARY_FIELD, LogBudget
from chatgate.domain.shown import Shown

LogFormat = Literal["text", "json"]
_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = _fields(record)
        if extras:
            line += " " + " ".join(f"{k}={_plain(v)}" for k, v in sorted(extras.items()))
        return line


def _plain(value: object) -> str:
    """A field as an operator reads it: a word bare, anything else as JSON (never a Python repr)."""
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"'=" for c in value):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": round(record.created, 6),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_fields(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


@dataclass
class LastProblem:
    message: str | None = None
    at: float | None = None


_CONVERSION = re.compile(r"%(\([^)]*\))?[#0 +-]*\d*(\.\d+)?[diouxXeEfFgGcrsa%]")


def _without_identifiers(record: logging.LogRecord) -> str:
    """The message with its arguments blanked, except measurements (floats) and exceptions.

    ``/status`` and ``chatgate status`` show this to whoever may ask; a chat or user id
    (a string or an integer argument) stays in the log line, which has the full text.
    Every log call passes its variable parts as arguments or ``extra=`` fields, never
    formatted into the template, so the template itself names no one; an argument wrapped
    in ``Shown`` (an error id, a kind) names no one either and is kept.
    """
    template = str(record.msg)
    args = record.args
    if not args:
        return template
    values = iter(args if isinstance(args, tuple) else ())

    def shown(match: re.Match[str]) -> str:
        spec = match.group(0)
        if spec == "%%":
            return "%"
        value = next(values, None)
        if isinstance(value, Shown):
            return str(value)
        if match.group(1) is None and isinstance(value, float | BaseException):
            with contextlib.suppress(TypeError, ValueError):
                return spec % (value,)
        return "…"

    return _CONVERSION.sub(shown, template)


class LastProblemHandler(logging.Handler):
    """Remembers the latest warning or error, identifier-free, for ``chatgate status``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = LastProblem()

    def emit(self, record: logging.LogRecord) -> None:
        text = _without_identifiers(record)
        self.last = LastProblem(f"{record.levelname} {record.name}: {text}", time.time())


LAST_PROBLEM = LastProblemHandler()


class LibraryBudget(logging.Filter):
    """A library logger's lines within a budget per message template (``LogBudget``).

    uvicorn logs what strangers cause itself ("Invalid HTTP request received.", a bad
    WebSocket frame, an exception a hung-up client left behind) and asyncio what hung-up
    sockets cause ("socket.send() raised exception."): each at most ``BURST`` times a minute
    per template, then one summary line with the count."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__()
        self.budget = LogBudget(logger)

    def filter(self, record: logging.LogRecord) -> bool:
        if hasattr(record, SUMMARY_FIELD):
            return True
        return self.budget.admit(record.levelno, f"{record.name}: {str(record.msg)[:120]}")


def _budget_library_lines() -> None:
    for name in STRANGER_FACING:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, LibraryBudget)]:
            logger.removeFilter(old)
        logger.addFilter(LibraryBudget(logger))


def setup_logging(level: str, fmt: LogFormat = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler, LAST_PROBLEM]
    root.setLevel(level)
    # Libraries log every request (uvicorn each WebSocket open/close, httpx each HTTP call,
    # aiohttp its access lines) at INFO: noise for an operator, kept for DEBUG.
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    for name in LIBRARY_CHATTER:
        logging.getLogger(name).setLevel(quiet)
    _budget_library_lines()


LIBRARY_CHATTER = (
    "uvicorn.access", "uvicorn.error", "openai", "aiohttp", "httpx", "httpcore", "httpx2", "httpcore2",
)  # fmt: skip
"""Library loggers quiet below WARNING unless debugging. httpx and its successor httpx2 (the
MCP client's) log one "HTTP Request: ..." line per call, so both."""
STRANGER_FACING = ("uvicorn.error", "asyncio")
"""Library loggers whose lines strangers can cause, budgeted by ``LibraryBudget``."""
