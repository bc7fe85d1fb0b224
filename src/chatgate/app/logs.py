"""Logging: readable lines by default, JSON lines with ``--log-format json``.

Structured fields passed with ``extra=`` (session_key, seqs, platform, code...)
are appended to text lines and become keys of JSON lines.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from typing import Literal

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


class LastProblemHandler(logging.Handler):
    """Remembers the latest warning or error, for ``chatgate status``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = LastProblem()

    def emit(self, record: logging.LogRecord) -> None:
        self.last = LastProblem(f"{record.levelname} {record.name}: {record.getMessage()}", time.time())


LAST_PROBLEM = LastProblemHandler()


def setup_logging(level: str, fmt: LogFormat = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler, LAST_PROBLEM]
    root.setLevel(level)
    # Libraries log every request (uvicorn each WebSocket open/close, httpx and the OpenAI SDK
    # each HTTP call, aiogram each update) at INFO: noise for an operator, kept for DEBUG.
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    for name in LIBRARY_CHATTER:
        logging.getLogger(name).setLevel(quiet)


LIBRARY_CHATTER = ("uvicorn.access", "uvicorn.error", "httpx", "httpcore", "openai", "aiogram")
