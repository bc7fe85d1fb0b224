"""Attachments (issue 29): a large image to the model against a bare copy, and the memory of
many uploads at once.

One process, the real parts of the media path over a real ``SqliteStore`` file: the engine's
``MediaFetcher`` (streaming ingest to a temporary file with sha256, the content checks with
Pillow, the blob store's fsync and rename, the record), then what the model is sent
(``MediaFetcher.contents`` and the OpenAI agent's ``user_content``: the image as a base64
``data:`` URL). The bytes come from an in-memory "platform" in 64 kB pieces.

- ``image``: an incompressible PNG of about ``--image-mb`` MB goes from the platform to the
  model's request body; ``bare_copy`` streams the same bytes to a file in the same pieces
  (write, fsync, read back, base64): the floor. ``ratio`` = media path / bare copy, medians
  over ``--runs``.
- ``api_image``: the same image sent inline to the API (a ``data:`` URL content part, as the
  ``openai`` client sends it): ``platforms.api.files.FileTaker`` decodes the base64 and takes
  it in (ingest, checks, blob store), then the model's request is made from the stored blob;
  against the same bare copy (``ratio``), and against the floor for that job, which must decode
  the client's base64 before the bare copy (``bare_decode_copy_s``, ``ratio_to_decode_floor``).
  The HTTP hops are not in it.
- ``uploads``: ``--users`` files of ``--upload-mb`` MB each arrive at once through
  ``MediaFetcher.take`` (as web chat uploads do), their bytes made piece by piece as they
  are read (the platform holds none); ``peak_rss_growth_mb`` is this process's peak RSS
  above its level before, sampled every 5 ms.

Prints one JSON object. ``--quick`` uses small sizes (a smoke run, not a measurement).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

PIECE = 64 * 1024


def noise_png(megabytes: float) -> bytes:
    from PIL import Image

    side = int((megabytes * 1_000_000 / 3) ** 0.5)
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(
        out, format="PNG", compress_level=1
    )
    return out.getvalue()


async def pieces(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), PIECE):
        yield data[start : start + PIECE]
        await asyncio.sleep(0)


async def made(size: int) -> AsyncIterator[bytes]:
    """``size`` bytes of text made as they are read (nothing held): what a network read gives."""
    line = b"the quick brown fox jumps over the lazy dog 0123456789\n" * 1190  # ~64 kB
    sent = 0
    while sent < size:
        piece = line[: min(len(line), size - sent)]
        sent += len(piece)
        yield piece
        await asyncio.sleep(0)


class Platform:
    """The adapter: serves one file from memory."""

    platform = "bench"

    def __init__(self, data: bytes) -> None:
        self.data = data

    def open_attachment(self, attachment: object) -> AsyncIterator[bytes]:
        return pieces(self.data)


def bare_copy(data: bytes, path: Path) -> str:
    with open(path, "wb") as f:
        for start in range(0, len(data), PIECE):
            f.write(data[start : start + PIECE])
        f.flush()
        os.fsync(f.fileno())
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode("ascii")


def bare_decode_copy(text: str, path: Path) -> str:
    """The API's floor: the client's base64 decoded, then the bare copy (what a bare program
    given the same request body must do to hand the model its bytes from disk)."""
    return bare_copy(base64.b64decode(text), path)


async def image_run(data: bytes, root: Path, run: int) -> tuple[float, float]:
    from chatgate.agents.media_parts import user_content
    from chatgate.domain.inbound import Attachment, Inbound
    from chatgate.domain.media import MediaLimits
    from chatgate.domain.source import Source
    from chatgate.domain.turns import QueuedItem
    from chatgate.engine.media_fetch import MediaFetcher
    from chatgate.store.sqlite import SqliteStore

    state = root / f"run-{run}"
    state.mkdir()
    store = SqliteStore(state / "chatgate.db")
    await store.open()
    try:
        limits = MediaLimits(max_bytes=len(data) * 2, max_pixels=10**9)
        fetcher = MediaFetcher(store, {"bench": Platform(data)}, limits, state / "blobs" / "tmp")  # type: ignore[dict-item]
        inbound = Inbound(
            "bench", f"d{run}", Source("bench", "c1"), "look", attachments=(Attachment("photo", "f1"),)
        )
        started = time.perf_counter()
        fetched = await fetcher.fetch([QueuedItem(run + 1, "k", inbound, 1)])
        items = fetched.all_items()
        contents = await fetcher.contents(items, [])
        content = user_content("look", items, contents, vision=True)
        media_s = time.perf_counter() - started
        assert isinstance(content, list) and content[1]["image_url"]["url"].startswith("data:image/png")
        started = time.perf_counter()
        await asyncio.to_thread(bare_copy, data, state / "copy.bin")
        bare_s = time.perf_counter() - started
    finally:
        await store.close()
    return media_s, bare_s


async def api_image_run(data: bytes, root: Path, run: int) -> tuple[float, float]:
    from chatgate.agents.media_parts import user_content
    from chatgate.domain.media import MediaLimits
    from chatgate.engine.media_fetch import MediaFetcher, stored_item
    from chatgate.platforms.api.bodies import ImagePart, ImageUrl
    from chatgate.platforms.api.files import FileTaker
    from chatgate.store.sqlite import SqliteStore

    state = root / f"api-{run}"
    state.mkdir()
    store = SqliteStore(state / "chatgate.db")
    await store.open()
    try:
        limits = MediaLimits(max_bytes=len(data) * 2, max_pixels=10**9)
        fetcher = MediaFetcher(store, {}, limits, state / "blobs" / "tmp")
        url = "data:image/png;base64," + base64.b64encode(data).decode("ascii")  # the client's body
        part = ImagePart(type="image_url", image_url=ImageUrl(url=url))
        started = time.perf_counter()
        (attachment,) = await FileTaker(fetcher, False).take([(1, part)], "messages.0.content")
        items = [stored_item(attachment, attachment.name or "image.png")]
        contents = await fetcher.contents(items, [])
        content = user_content("look", items, contents, vision=True)
        elapsed = time.perf_counter() - started
        assert isinstance(content, list) and content[1]["image_url"]["url"].startswith("data:image/png")
        text = url.split(",", 1)[1]
        started = time.perf_counter()
        await asyncio.to_thread(bare_decode_copy, text, state / "copy.bin")
        bare_s = time.perf_counter() - started
    finally:
        await store.close()
    return elapsed, bare_s


async def uploads_run(users: int, size: int, root: Path) -> dict[str, float]:
    from chatgate.domain.media import MediaLimits
    from chatgate.engine.media_fetch import MediaFetcher
    from chatgate.store.sqlite import SqliteStore

    state = root / "uploads"
    state.mkdir()
    store = SqliteStore(state / "chatgate.db")
    await store.open()
    process = psutil.Process()
    before = process.memory_info().rss
    peak = before
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            await asyncio.sleep(0.005)

    try:
        limits = MediaLimits(max_bytes=size * 2)
        fetcher = MediaFetcher(store, {}, limits, state / "blobs" / "tmp")
        sampler = asyncio.create_task(sample())
        started = time.perf_counter()
        items = await asyncio.gather(*(fetcher.take(made(size), "web", f"u{i}.txt") for i in range(users)))
        elapsed = time.perf_counter() - started
        done.set()
        await sampler
        assert all(item.size == size for item in items)
    finally:
        await store.close()
    return {
        "users": users,
        "file_mb": size / 1e6,
        "seconds": round(elapsed, 3),
        "peak_rss_growth_mb": round((peak - before) / 1e6, 1),
    }


async def main(args: argparse.Namespace) -> dict[str, object]:
    data = noise_png(args.image_mb)
    media: list[float] = []
    bare: list[float] = []
    api: list[float] = []
    api_bare: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-media-") as tmp:
        root = Path(tmp)
        for run in range(args.runs):
            m, b = await image_run(data, root, run)
            media.append(m)
            bare.append(b)
            a, ab = await api_image_run(data, root, run)
            api.append(a)
            api_bare.append(ab)
        uploads = await uploads_run(args.users, int(args.upload_mb * 1e6), root)
    media_s, bare_s = statistics.median(media), statistics.median(bare)
    return {
        "image": {
            "bytes": len(data),
            "media_path_s": round(media_s, 4),
            "bare_copy_s": round(bare_s, 4),
            "ratio": round(media_s / bare_s, 2),
            "runs": args.runs,
        },
        "api_image": {
            "api_path_s": round(statistics.median(api), 4),
            "ratio": round(statistics.median(api) / bare_s, 2),
            "bare_decode_copy_s": round(statistics.median(api_bare), 4),
            "ratio_to_decode_floor": round(statistics.median(api) / statistics.median(api_bare), 2),
        },
        "uploads": uploads,
    }


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--image-mb", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--upload-mb", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.image_mb, args.runs, args.users, args.upload_mb = 0.5, 1, 3, 1.0
    return args


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(parse()))))
