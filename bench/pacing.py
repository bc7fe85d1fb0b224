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
calls / span from the first to the last), ``share_429``, and from the gateway's SQLite outbox
``max_attempts`` and ``failed`` rows; ``typing_turns`` counts chats that saw a chat action
before their first reply. Exits 1 unless every message was answered exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "platforms"))  # the Bot API double lives with the tests

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


async def scenario(limit: int | None, messages: int, chats: int, workdir: Path) -> dict[str, Any]:
    double = BotApiDouble()
    double.global_limit = limit
    await double.start()
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
    return {
        "answered": replied(),
        "calls": len(calls),
        "busiest_second": busiest([c.at for c in calls], 1.0),
        "busiest_10ms": busiest([c.at for c in calls], 0.01),
        "calls_per_s": round((len(accepted) - 1) / span, 2) if span else None,
        "share_429": round(sum(1 for c in calls if c.status == 429) / max(1, len(calls)), 3),
        "max_attempts": max((a for _, a in rows), default=0),
        "failed": sum(1 for s, _ in rows if s == "failed"),
        "typing_turns": typing,
        "chats": chats,
    }


async def main() -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    messages, chats = (40, 20) if args.quick else (args.messages, args.chats)
    os.environ[TOKEN_ENV] = TOKEN
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    out: dict[str, Any] = {"messages": messages, "chats": chats, "load_before": os.getloadavg()}
    limits: list[int | None] = [None, 5] if args.quick else [None, 20, 10, 5]
    ok = True
    for limit in limits:
        name = "default" if limit is None else f"limit_{limit}"
        print(f"running {name}", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="chatgate-pacing-") as tmp:
            out[name] = result = await scenario(limit, messages, chats, Path(tmp))
        ok = ok and result["answered"] == messages and result["failed"] == 0
    out["load_after"] = os.getloadavg()
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
