"""One account with thousands of conversations must not slow another (issue 27, finding 7).

Seeds a real SQLite store (a file in a temp dir, the gateway's own schema) with one heavy
account's conversations (each a session, two user messages in the transcript and three
replies in the outbox) and one light account's 20, then measures through the store's
``WebChats`` role, the calls the web chat's conversation list makes:

- the heavy account's list and a search, alone;
- the light account's list alone (p50, p99 over 200 calls);
- the light account's list while the heavy account runs 4 searches at once, over and over
  (p50, p99, max), each call passed through the web chat's ``HeavyReads`` gate when this
  code has one (``--no-gate`` leaves it out, to show what the gate adds).

Rows are seeded with SQL (a bench, not a test: 10,000 conversations through the pipeline
would take minutes); the reads are the real role methods. The same command measures an older
checkout through ``PYTHONPATH`` (it then has no gate, and no per-user cap, so it seeds all).

    .venv/bin/python bench/heavy_user.py [--conversations 10000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from chatgate.store.sqlite.store import SqliteStore

PLATFORM = "web"
WORDS = ("apple", "river", "orbit", "lantern", "cobalt", "meadow", "quartz", "harbor", "tundra", "violet")


def seed(path: Path, owner: str, chats: int, prefix: str) -> None:
    """``chats`` conversations of ``owner``, each with a session, a transcript and replies."""
    conn = sqlite3.connect(path)
    now = time.time() - chats
    with conn:
        for n in range(chats):
            chat = f"{prefix}{n}"
            key = f"{PLATFORM}:{chat}"
            at = now + n
            word = WORDS[n % len(WORDS)]
            conn.execute(
                "INSERT INTO web_chats (platform, chat_id, owner_id, title, created_at) VALUES (?,?,?,?,?)",
                (PLATFORM, chat, owner, f"about {word} {n}", at),
            )
            conn.execute(
                "INSERT INTO sessions (key, session_id, platform, chat_id, source_json, created_at,"
                " last_activity) VALUES (?,?,?,?,?,?,?)",
                (key, f"s{prefix}{n}", PLATFORM, chat, "{}", at, at),
            )
            for i in range(2):
                conn.execute(
                    "INSERT INTO transcript (session_id, session_key, role, content, created_at)"
                    " VALUES (?,?,?,?,?)",
                    (f"s{prefix}{n}", key, "user", f"tell me about the {word} number {n} part {i}", at),
                )
            for i in range(3):
                conn.execute(
                    "INSERT INTO outbox (idem_key, platform, chat_id, session_key, kind, text, target_json,"
                    " status, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        f"{prefix}{n}:{i}",
                        PLATFORM,
                        chat,
                        key,
                        "final",
                        f"here is what I know of {word}s, reply {i} in conversation {n}",
                        "{}",
                        "confirmed",
                        at,
                    ),
                )
    conn.close()


async def create_schema(path: Path) -> None:
    """The gateway's own schema, made by the store itself."""
    store = SqliteStore(path)
    await store.open()
    await store.close()


def gate_factory(use_gate: bool) -> Callable[[str], contextlib.AbstractAsyncContextManager[None]]:
    """The web chat's gate around a list or search, when this code has one."""
    try:
        from chatgate.platforms.webchat.heavy_reads import HeavyReads
    except ImportError:
        use_gate = False
    if not use_gate:

        @contextlib.asynccontextmanager
        async def open_door(user: str) -> AsyncIterator[None]:
            yield

        return open_door
    gate = HeavyReads()
    return gate.hold


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(p99, 2),
        "max_ms": round(ordered[-1], 2),
    }


async def measure(path: Path, seconds: float, use_gate: bool) -> dict[str, Any]:
    store = SqliteStore(path)
    await store.open()
    hold = gate_factory(use_gate)
    try:

        async def heavy_list() -> Any:
            async with hold("heavy"):
                return await store.list_chats(PLATFORM, "heavy", None, 50)

        async def heavy_search() -> Any:
            async with hold("heavy"):
                return await store.list_chats(PLATFORM, "heavy", "lantern", 50)

        async def light_list() -> Any:
            async with hold("light"):
                return await store.list_chats(PLATFORM, "light", None, 50)

        figures: dict[str, Any] = {
            "heavy_list_ms": round(await timed(heavy_list), 1),
            "heavy_search_ms": round(await timed(heavy_search), 1),
            "heavy_search_hits": len(await heavy_search()),
        }
        figures["light_list_alone"] = summary([await timed(light_list) for _ in range(200)])
        stop = time.monotonic() + seconds
        searches = 0

        async def searcher() -> None:
            nonlocal searches
            while time.monotonic() < stop:
                await heavy_search()
                searches += 1

        async def lister() -> list[float]:
            samples = []
            while time.monotonic() < stop:
                samples.append(await timed(light_list))
                await asyncio.sleep(0.005)
            return samples

        results = await asyncio.gather(*(searcher() for _ in range(4)), lister())
        figures["light_list_during_4_searches"] = summary(results[-1])
        figures["heavy_searches_done"] = searches
        return figures
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--no-gate", action="store_true", help="leave the web chat's HeavyReads gate out")
    parser.add_argument("--quick", action="store_true", help="200 conversations for 1 s (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.seconds = 200, 1.0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chatgate.db"
        asyncio.run(create_schema(path))
        seed(path, "heavy", args.conversations, "h")
        seed(path, "light", 20, "l")
        figures = asyncio.run(measure(path, args.seconds, not args.no_gate))
    print(
        json.dumps(
            {"conversations": args.conversations, "python": sys.version.split()[0], **figures},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
