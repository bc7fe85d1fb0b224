"""Reading a stored file for an upload or a download (issue 29): the whole blob (``read_blob``,
what delivery does for Telegram, Discord and Slack) against the stream of pieces (``open_blob``,
what the web chat's download route serves), side by side on SQLite and PostgreSQL.

Each measurement runs in a fresh subprocess (ru_maxrss is a peak: one per process): it stores a
``--mb`` MB blob, then reads it one way, consuming each piece as a sender would, and reports the
peak RSS growth over the read. Prints one JSON object. Run from the repository root:

    .venv/bin/python bench/blob_stream.py --mb 20
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DSN = os.environ.get("CHATGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def _store(backend: str, tmp: Path) -> Any:
    if backend == "sqlite":
        from chatgate.store.sqlite.store import SqliteStore

        return SqliteStore(tmp / "chatgate.db")
    from chatgate.store.postgres.store import PostgresStore

    return PostgresStore(DSN, schema=f"bench_blob_{os.getpid()}")


def _make_file(path: Path, size: int) -> str:
    """Random bytes made a MB at a time (the peak before the read stays low); their sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for _ in range(0, size, 1_000_000):
            piece = os.urandom(min(1_000_000, size - f.tell()))
            digest.update(piece)
            f.write(piece)
    return digest.hexdigest()


async def _measure(backend: str, mode: str, size: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="chatgate-blob-"))
    sha = _make_file(tmp / "in.part", size)
    store = _store(backend, tmp)
    await store.open()
    try:
        await store.put_blob(sha, str(tmp / "in.part"))
        gc.collect()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        digest = hashlib.sha256()
        if mode == "whole":
            whole = await store.read_blob(sha)
            digest.update(whole)
            del whole
        else:
            stream = await store.open_blob(sha)
            async for piece in stream.chunks:
                digest.update(piece)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        assert digest.hexdigest() == sha
    finally:
        if backend == "postgres":
            import asyncpg

            conn = await asyncpg.connect(DSN)
            await conn.execute(f'DROP SCHEMA IF EXISTS "bench_blob_{os.getpid()}" CASCADE')
            await conn.close()
        await store.close()
    return {"peak_rss_growth_mb": round((after - before) / 1024, 1), "seconds": round(seconds, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="2 MB: the smoke test's size")
    parser.add_argument("--one", nargs=2, metavar=("BACKEND", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.mb = 2.0
    size = int(args.mb * 1_000_000)
    if args.one:
        print(json.dumps(asyncio.run(_measure(args.one[0], args.one[1], size))))
        return
    results: dict[str, Any] = {"mb": args.mb}
    for backend in ("sqlite", "postgres"):
        for mode in ("whole", "stream"):
            cmd = [sys.executable, __file__, "--mb", str(args.mb), "--one", backend, mode]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            results[f"{backend}_{mode}"] = json.loads(out.stdout)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
