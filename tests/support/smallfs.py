"""A real, small file system for full-disk tests: a tmpfs mount, or a loop-mounted ext4 image.

Mounting needs root (or a user namespace that allows it). Where the machine forbids both
kinds of mount the test is skipped with the reason; on CI (``CI=true``) it fails instead,
because a full-disk test that silently never runs proves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest


def _run(*argv: str) -> str | None:
    """None on success, else why it failed."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]}: {exc}"
    return None if done.returncode == 0 else f"{' '.join(argv)}: {done.stderr.strip() or done.returncode}"


def _mount(where: Path, size_kib: int) -> str | None:
    tmpfs = _run("mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(where))
    if tmpfs is None:
        return None
    image = where.with_name(where.name + ".img")
    with image.open("wb") as f:
        f.truncate(size_kib * 1024)
    loop = _run("mkfs.ext4", "-q", "-F", str(image)) or _run("mount", "-o", "loop", str(image), str(where))
    if loop is None:
        return None
    return f"tmpfs: {tmpfs}; loop-mounted ext4: {loop}"


@contextlib.contextmanager
def small_fs(where: Path, size_kib: int = 2048) -> Iterator[Path]:
    """Mount a file system of ``size_kib`` KiB at ``where`` for the duration of the block."""
    where.mkdir(parents=True, exist_ok=True)
    why = _mount(where, size_kib)
    if why is not None:
        message = f"this machine cannot mount a small file system ({why})"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must be able to run the full-disk tests")
        pytest.skip(message)
    try:
        yield where
    finally:
        _run("umount", "-l", str(where))


def fill(path: Path) -> int:
    """Append to ``path`` until the file system has no room left; returns the bytes written."""
    block = b"\xa5" * 65536
    written = 0
    with path.open("ab", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            while True:
                try:
                    written += f.write(block[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return written


@contextlib.asynccontextmanager
async def disk_hog(path: Path, every: float = 0.02) -> AsyncIterator[None]:
    """Keep the file system full: whatever room anybody frees, ``path`` takes again at once.

    Filling once is not enough: the gateway truncates its WAL on a full disk, and the room
    that frees would let its next writes through. Another program hogging the disk does not
    give that room back. Leaving the block deletes ``path``.
    """
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            await asyncio.to_thread(fill, path)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    await asyncio.to_thread(fill, path)
    task = asyncio.create_task(hog())
    try:
        yield
    finally:
        stop.set()
        await task
        await asyncio.to_thread(path.unlink)
