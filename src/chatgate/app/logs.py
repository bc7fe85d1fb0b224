"""Logging set-up: readable lines with the structured fields appended."""

from __future__ import annotations

import logging
import sys

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class FieldsFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        if extras:
            line += " " + " ".join(f"{k}={v!r}" for k, v in sorted(extras.items()))
        return line


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # uvicorn logs every WebSocket open/close at INFO; that is noise for a chat gateway.
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    logging.getLogger("uvicorn.access").setLevel(quiet)
    logging.getLogger("uvicorn.error").setLevel(quiet)
