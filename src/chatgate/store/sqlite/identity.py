"""A state directory remembers it had a database: a lost file stops the start instead of starting empty.

SQLite creates a missing file without a word, so a deleted or truncated database
would come back empty and every acknowledged message in it would be gone in
silence. At its first creation the store writes ``<db>.identity`` beside the
database; while that record exists, a database that is missing, empty, not a
SQLite file or shorter than its own header says is refused with what happened and
how to start fresh on purpose (``chatgate run --reset-state``, which sets the
remains aside instead of deleting them).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from chatgate.domain.errors import StoreUnavailable

MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100


class StateDamaged(StoreUnavailable):
    """The database this state directory had is missing or damaged; a restart will not fix it."""


def marker_path(db_path: str | Path) -> Path:
    return Path(f"{db_path}.identity")


def damage(db_path: str | Path) -> str | None:
    """What is wrong with a database that once existed here (None when nothing is, or none ever did)."""
    if not marker_path(db_path).exists():
        return None
    return _problem(Path(db_path))


def _problem(db: Path) -> str | None:
    try:
        size = db.stat().st_size
        with db.open("rb") as f:
            header = f.read(HEADER_BYTES)
    except FileNotFoundError:
        return "is missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if size == 0:
        return "is empty (0 bytes)"
    if len(header) < HEADER_BYTES or not header.startswith(MAGIC):
        return "is not a SQLite database"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    size_valid = header[24:28] == header[92:96]  # the in-header size is current
    wal = Path(f"{db}-wal")
    wal_pending = wal.exists() and wal.stat().st_size > 0  # an interrupted checkpoint finishes from it
    if size_valid and not wal_pending and size < pages * page_size:
        return f"is truncated ({size} of {pages * page_size} bytes)"
    return None


def refuse_if_damaged(db_path: str) -> None:
    problem = damage(db_path)
    if problem is None:
        return
    raise StateDamaged(
        f"the database {db_path} {problem}, but this state directory had one"
        f" (see {marker_path(db_path)}): the messages and replies it held are not there."
        " Restore it from a backup, or start with an empty database on purpose with"
        " `chatgate run --reset-state` (sets the remains aside beside it)."
    )


def record(db_path: str) -> None:
    """Write the identity record once the database exists (at first creation, or for an older state dir)."""
    marker = marker_path(db_path)
    if marker.exists():
        return
    tmp = marker.with_name(marker.name + ".tmp")
    body = {"database": Path(db_path).name, "created_at": time.time(), "pid": os.getpid()}
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(body, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, marker)
    dir_fd = os.open(marker.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def set_aside(db_path: str | Path) -> list[Path]:
    """Move a damaged database's files aside (never delete them) so the next open starts empty.

    Does nothing to a healthy database: ``--reset-state`` is for accepting a loss, not for wiping.
    """
    if damage(db_path) is None:
        return []
    stamp = time.strftime("%Y%m%dT%H%M%S")
    moved: list[Path] = []
    for suffix in ("", "-wal", "-shm", ".identity"):
        path = Path(f"{db_path}{suffix}")
        if path.exists():
            target = path.with_name(f"{path.name}.damaged-{stamp}")
            os.replace(path, target)
            moved.append(target)
    return moved
