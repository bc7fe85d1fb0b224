"""``attach_file``: the agent sends a file from its work directory with its reply.

This module reads the file safely; the engine asks approval first and adds the file to the
turn's reply (``engine/approvals/tools.py``). The path is confined to the work directory:
it is resolved (symlinks included) and must stay inside it, and the file is then opened
without following a symlink and checked to be a regular file, so a link swapped in between
cannot lead out. The bytes are copied to a scratch file while they are hashed, bounded by
``max_bytes``, in a thread: nothing blocks the event loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from chatgate.agents.base import ToolCall
from chatgate.agents.tools.runner import ToolArgumentError
from chatgate.domain.media import human_size, refine_text, sanitize_name, sniff

ATTACH_TOOL_NAME = "attach_file"
CHUNK = 1024 * 1024
HEAD = 4096

ATTACH_TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": ATTACH_TOOL_NAME,
        "description": (
            "Send a file from the work directory to the user with this reply (an image is shown as "
            "a photo where the chat can). The path is relative to the work directory."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the file's path, relative to the work directory"},
                "caption": {"type": "string", "description": "optional text shown with the file"},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
}


class AttachRequest(msgspec.Struct, frozen=True):
    path: str
    caption: str


class ReadFile(msgspec.Struct, frozen=True):
    """A file copied to ``scratch`` (for the blob store to take in), hashed and typed by content."""

    scratch: str
    sha: str
    size: int
    mime: str
    name: str


class AttachRefused(Exception):
    """The file cannot be attached; the message is for the model."""


def attach_request(call: ToolCall) -> AttachRequest:
    """The arguments of an ``attach_file`` call, or ``ToolArgumentError`` saying what is wrong."""
    extra = sorted(k for k in call.arguments if k not in ("path", "caption"))
    if extra:
        raise ToolArgumentError(f"unexpected argument(s) {', '.join(map(repr, extra))}")
    path, caption = call.arguments.get("path"), call.arguments.get("caption", "")
    if not isinstance(path, str) or not path.strip():
        raise ToolArgumentError("argument 'path' must be a non-empty string")
    if "\x00" in path:
        raise ToolArgumentError("argument 'path' contains a NUL character")
    if not isinstance(caption, str):
        raise ToolArgumentError("argument 'caption' must be a string")
    return AttachRequest(path.strip(), caption.strip()[:1000])


def confined(workdir: Path, path: str) -> Path:
    """``path`` under ``workdir`` with every symlink resolved; ``AttachRefused`` if it leads out."""
    root = workdir.resolve()
    try:
        resolved = (root / path).resolve(strict=True)
    except (OSError, RuntimeError):
        raise AttachRefused(f"there is no file {path!r} in the work directory") from None
    if not resolved.is_relative_to(root) or resolved == root:
        raise AttachRefused(f"{path!r} is outside the work directory")
    return resolved


def read_file(workdir: Path, path: str, max_bytes: int, scratch: Path) -> ReadFile:
    """Copy the confined file to a scratch file in ``scratch``, hashing it (blocking: run in a thread)."""
    resolved = confined(workdir, path)
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise AttachRefused(f"cannot open {path!r}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # a directory, a FIFO, a device: never read
        os.close(fd)
        raise AttachRefused(f"{path!r} is not a regular file")
    with os.fdopen(fd, "rb") as source:
        if info.st_size == 0:
            raise AttachRefused(f"{path!r} is empty")
        if info.st_size > max_bytes:
            shown, limit = human_size(info.st_size), human_size(max_bytes)
            raise AttachRefused(f"{path!r} is {shown}; the limit is {limit}")
        scratch.mkdir(parents=True, exist_ok=True)
        digest, size, head = hashlib.sha256(), 0, b""
        out = tempfile.NamedTemporaryFile(dir=scratch, prefix="out-", delete=False)  # noqa: SIM115
        try:
            with out:
                while chunk := source.read(CHUNK):
                    size += len(chunk)
                    if size > max_bytes:  # it grew while we read it
                        raise AttachRefused(f"{path!r} is larger than {human_size(max_bytes)}")
                    if len(head) < HEAD:
                        head += chunk[: HEAD - len(head)]
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            Path(out.name).unlink(missing_ok=True)
            raise
    name = sanitize_name(resolved.name)
    return ReadFile(out.name, digest.hexdigest(), size, refine_text(sniff(head), name), name)


async def read_file_async(workdir: Path, path: str, max_bytes: int, scratch: Path) -> ReadFile:
    return await asyncio.to_thread(read_file, workdir, path, max_bytes, scratch)
