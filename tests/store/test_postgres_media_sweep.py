"""Retention in a fleet on one PostgreSQL: two processes sweep at once and each blob is deleted
once (the sweep is idempotent and skips the rows another sweep holds); a blob a record names
stays."""

from __future__ import annotations

import asyncio
import hashlib
import time
from pathlib import Path

from chatgate.domain.media import MediaItem, MediaRecord
from contract.kit import T0
from support.postgres import make_store_fixture, pg_schema_fixture  # noqa: F401


def _file(tmp_path: Path, data: bytes, tag: str) -> tuple[str, str]:
    path = tmp_path / f"{tag}-{hashlib.sha256(data).hexdigest()[:8]}"
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest(), str(path)


async def test_two_processes_sweeping_at_once_delete_each_blob_once(make_store, tmp_path):
    a, b = make_store(), make_store()
    await a.open()
    await b.open()
    shas = []
    for i in range(12):
        sha, path = _file(tmp_path, f"orphan {i}".encode() * 1000, "o")
        await a.put_blob(sha, path)
        shas.append(sha)
    kept, path = _file(tmp_path, b"named by a record", "k")
    await a.put_blob(kept, path)
    await a.record_media(MediaRecord("5:0", MediaItem(kept, "text/plain", 17, "k.txt"), None), T0)
    cutoff = time.time() + 1
    removed = await asyncio.gather(a.sweep_blobs(cutoff), b.sweep_blobs(cutoff), a.sweep_blobs(cutoff))
    assert sum(removed) == 12  # each orphan once, whichever process took it
    for sha in shas:
        assert await b.read_blob(sha) is None
    assert await b.read_blob(kept) == b"named by a record"
