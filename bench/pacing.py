#!/usr/bin/env python
"""Telegram pacing at saturation and under a stricter platform limit, from the Bot API double's log.

Runs an in-process gateway (echo agent, Telegram only, the real client) against the Bot API
double (``tests/platforms/telegram_double.py``) and pushes N messages over C private chats
at once. Scenarios, one fresh gateway and double each:

- ``default``: the gateway's Telegram defaults (30 calls/s, 1 message/s per chat), no limit
  in the double: is the rate held in every second, and reached?
- ``limit_<L>``: the double answers 429 (``retry_after``) once L chat calls were accepted in
  the last second (L = 20, 10, 5), the gateway still at its default 30/s.

Per scenario, from the double's call log (sends, edits, deletes, chat actions):
``busiest_second`` (most calls in any 1 s window), ``busiest_10ms``, ``calls_per_s`` (accepted
calls / span from the first to the last), ``budget_share`` (that over the configured 30/s),
``replies_per_s``, ``share_429``, ``idle_gaps`` (gaps between calls over 100 ms while some reply
was due: its chat's one-a-second interval over and it not yet sent; count and longest), and
from the gateway's SQLite outbox ``max_attempts`` and ``failed`` rows; ``typing_turns`` counts
chats that saw a chat action before their first reply.

``first_contact`` (issue 33, item 2): 50 new conversations at once, each one message, the
double limited to the gateway's 30 calls/s; the time from each push to its reply's arrival
(p50, p95), side by side with a bare echo bot on the same Bot API client (as
``bench/telegram_echo_bot.py``, retrying a 429 after its ``retry_after``) against a fresh
double with the same limit. Exits 1 unless every message was answered exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "platforms"))  # the Bot API double lives with the tests

import pacing_log  # noqa: E402
from telegram_double import (  # noqa: E402
    TOKEN,
    TOKEN_ENV,
    BotApiDouble,
    Gateways,
    User,
    busiest,
    private,
    telegram_config,
)

from chatgate.platforms.telegram.botapi import BotApi  # noqa: E402
from chatgate.platforms.telegram.errors import ApiRefused  # noqa: E402

BUDGET = 30.0
"""The gateway's Telegram default (calls per second), which the double enforces in first_contact."""
GAP = 0.1


def idle_gaps(calls: list[Any], recorded: dict[int, list[float]]) -> dict[str, Any]:
    """Gaps over ``GAP`` between consecutive calls while a reply was due (recorded: its turn
    committed, ``recorded`` per chat in the double's clock; its chat's previous message over a
    second before; not yet sent) and the budget's window had room (a full window is the limit
    working, not idleness: ``tests/platforms/pacing_log.py``)."""
    replies: dict[str, list[float]] = {}
    starts: list[float] = []
    for chat_id, ready in recorded.items():
        sends = sorted(
            c.at for c in calls if c.chat_id == chat_id and c.method == "sendMessage" and c.status == 200
        )
        replies[str(chat_id)] = sends[: len(ready)]
        starts.append(min(ready))
    start = min(starts, default=0.0)
    gaps = [
        length
        for _, length in pacing_log.idle_gaps([c.at for c in calls], replies, start, 1.0, GAP, int(BUDGET))
    ]
    return {"count": len(gaps), "longest_ms": round(max(gaps, default=0.0) * 1000, 1)}


async def scenario(
    limit: int | None, messages: int, chats: int, workdir: Path, flooded: int = 0
) -> dict[str, Any]:
    double = BotApiDouble()
    double.global_limit = limit
    await double.start()
    if flooded:
        double.flood(10_000, flooded)  # the first chat's first send: 429 retry_after ``flooded``
    gateways = Gateways(workdir)
    try:
        users = [User(10_000 + n, f"U{n}") for n in range(chats)]
        config = telegram_config(double, workdir, telegram={"allow_users": [str(u.id) for u in users]})
        gateway = await gateways.start(config)
        for i in range(messages):
            user = users[i % chats]
            await double.push_message(private(user), user, f"m{i}")
        replied = lambda: sum(1 for m in double.all_sent() if m.text.startswith("echo: "))  # noqa: E731
        await double.wait_for(lambda: replied() >= messages, timeout=60 + messages, what="every reply")
        await asyncio.sleep(0.5)  # let the last settlements commit
        with sqlite3.connect(gateway.store.path) as db:
            rows = db.execute("SELECT status, attempts FROM outbox").fetchall()
            created = db.execute("SELECT chat_id, created_at FROM outbox ORDER BY id").fetchall()
        to_loop = asyncio.get_running_loop().time() - time.time()  # the double stamps loop time
        recorded: dict[int, list[float]] = {}
        for chat_id, at in created:
            recorded.setdefault(int(chat_id), []).append(at + to_loop)
        lag = max(gateway.lag.samples, default=0.0)
    finally:
        await gateways.stop_all()
        await double.stop()
    calls = double.chat_calls()
    accepted = [c.at for c in calls if c.status == 200]
    typing = sum(
        1
        for u in users
        if (kinds := [c.method for c in calls if c.chat_id == u.id])
        and "sendChatAction" in kinds
        and "sendMessage" in kinds
        and kinds.index("sendChatAction") < kinds.index("sendMessage")
    )
    span = accepted[-1] - accepted[0] if len(accepted) > 1 else 0.0
    replies = sorted(c.at for c in calls if c.status == 200 and c.method == "sendMessage")
    reply_span = replies[-1] - replies[0] if len(replies) > 1 else 0.0
    others = sorted(
        c.at for c in calls if c.status == 200 and c.method == "sendMessage" and c.chat_id != users[0].id
    )
    return {
        "answered": replied(),
        "calls": len(calls),
        "busiest_second": busiest([c.at for c in calls], 1.0),
        "busiest_10ms": busiest([c.at for c in calls], 0.01),
        "calls_per_s": round((len(accepted) - 1) / span, 2) if span else None,
        "budget_share": round((len(accepted) - 1) / span / BUDGET, 3) if span else None,
        "replies_per_s": round((len(replies) - 1) / reply_span, 2) if reply_span else None,
        "others_replies_per_s": round((len(others) - 1) / (others[-1] - others[0]), 2)
        if len(others) > 1 and others[-1] > others[0]
        else None,
        "idle_gaps": idle_gaps(calls, recorded),
        "loop_lag_max_ms": round(lag * 1000, 1),
        "share_429": round(sum(1 for c in calls if c.status == 429) / max(1, len(calls)), 3),
        "max_attempts": max((a for _, a in rows), default=0),
        "failed": sum(1 for s, _ in rows if s == "failed"),
        "typing_turns": typing,
        "chats": chats,
    }


async def bare_bot(double: BotApiDouble) -> asyncio.Task[None]:
    """The bare echo bot of ``bench/telegram_echo_bot.py``, in this loop, retrying a 429."""
    api = BotApi(TOKEN, double.base)

    async def answer(update: dict[str, Any]) -> None:
        message = update.get("message") or {}
        while True:
            try:
                await api.call(
                    "sendMessage", 20, chat_id=message["chat"]["id"], text=f"echo: {message['text']}"
                )
                return
            except ApiRefused as exc:
                if exc.retry_after is None:
                    raise
                await asyncio.sleep(exc.retry_after)

    async def poll() -> None:
        offset = None
        try:
            while True:
                updates = await api.call("getUpdates", 40, offset=offset, timeout=25)
                await asyncio.gather(*(answer(u) for u in updates))
                if updates:
                    offset = updates[-1]["update_id"] + 1
        finally:
            await api.aclose()

    return asyncio.create_task(poll())


async def first_contact(subject: str, conversations: int, workdir: Path) -> dict[str, Any]:
    """``conversations`` new chats write at once; each reply's arrival after its push (ms)."""
    double = BotApiDouble()
    double.global_limit = int(BUDGET)
    await double.start()
    gateways = Gateways(workdir)
    users = [User(20_000 + n, f"F{n}") for n in range(conversations)]
    bot: asyncio.Task[None] | None = None
    try:
        if subject == "gateway":
            config = telegram_config(double, workdir, telegram={"allow_users": [str(u.id) for u in users]})
            await gateways.start(config)
        else:
            bot = await bare_bot(double)
        await asyncio.sleep(0.5)  # both are polling
        pushed: dict[int, float] = {}
        for user in users:
            await double.push_message(private(user), user, f"hello {user.id}")
            pushed[user.id] = asyncio.get_running_loop().time()
        replied = lambda: sum(1 for m in double.all_sent() if m.text.startswith("echo: "))  # noqa: E731
        await double.wait_for(lambda: replied() >= conversations, timeout=60, what="every first reply")
    finally:
        if bot is not None:
            bot.cancel()
            await asyncio.gather(bot, return_exceptions=True)
        await gateways.stop_all()
        await double.stop()
    calls = double.chat_calls()
    first = {}
    for c in calls:
        if c.method == "sendMessage" and c.status == 200 and c.chat_id not in first:
            first[c.chat_id] = (c.at - pushed[c.chat_id]) * 1000
    latencies = sorted(first.values())
    return {
        "answered": replied(),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
        "calls_429": sum(1 for c in calls if c.status == 429),
        "typing_calls": sum(1 for c in calls if c.method == "sendChatAction"),
    }


async def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--conversations", type=int, default=50, help="first_contact's new chats")
    parser.add_argument("--limits", default="none,20,10,5", help="the double's limits to run (none: default)")
    parser.add_argument(
        "--one-chat", type=int, default=5, help="one_chat's retry_after for the first chat (0: skip)"
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    messages, chats = (40, 20) if args.quick else (args.messages, args.chats)
    if args.quick:
        args.one_chat = min(args.one_chat, 1)
    os.environ[TOKEN_ENV] = TOKEN
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    out: dict[str, Any] = {"messages": messages, "chats": chats, "load_before": os.getloadavg()}
    wanted = "none,5" if args.quick else args.limits
    limits = [None if x == "none" else int(x) for x in wanted.split(",") if x]
    ok = True
    for limit in limits:
        name = "default" if limit is None else f"limit_{limit}"
        print(f"running {name}", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="chatgate-pacing-") as tmp:
            out[name] = result = await scenario(limit, messages, chats, Path(tmp))
        ok = ok and result["answered"] == messages and result["failed"] == 0
    if args.one_chat:
        print(f"running one_chat (the first chat told to wait {args.one_chat} s)", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="chatgate-pacing-") as tmp:
            out["one_chat"] = result = await scenario(None, messages, chats, Path(tmp), args.one_chat)
        ok = ok and result["answered"] == messages and result["failed"] == 0
        base, limited = out.get("default", {}).get("others_replies_per_s"), result["others_replies_per_s"]
        out["one_chat"]["others_vs_default"] = round(limited / base, 3) if base and limited else None
    contact: dict[str, Any] = {}
    for subject in ("bare", "gateway"):
        print(f"running first_contact ({subject})", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="chatgate-pacing-") as tmp:
            contact[subject] = await first_contact(subject, args.conversations, Path(tmp))
        ok = ok and contact[subject]["answered"] == args.conversations
    contact["p50_ratio"] = round(contact["gateway"]["p50_ms"] / max(0.1, contact["bare"]["p50_ms"]), 2)
    out["first_contact"] = contact
    out["load_after"] = os.getloadavg()
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
