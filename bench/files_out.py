"""Files the agent sends (issue 29): one ``attach_file`` of ``--mb`` MB through a real in-process
gateway to the Telegram Bot API double (tests/platforms/telegram_double.py), which parses the
multipart upload as Telegram does.

Measures the time from the user's message to the file's arrival at the double, and the peak
RSS growth of the process over it (ru_maxrss: the gateway *and* the double, which keeps the
file, share the process). Prints one JSON object. Run from the repository root:

    .venv/bin/python bench/files_out.py --mb 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = ["tests", "tests/platforms"]


async def run(size: int) -> dict[str, float]:
    from telegram_double import TOKEN, TOKEN_ENV, BotApiDouble, Gateways, User, private, telegram_config

    os.environ[TOKEN_ENV] = TOKEN
    tmp = Path(tempfile.mkdtemp(prefix="chatgate-files-out-"))
    work = tmp / "work"
    work.mkdir()
    (work / "big.bin").write_bytes(os.urandom(size))
    double = BotApiDouble()
    await double.start()
    gateways = Gateways(tmp)
    user = User(700, "M")
    chat = private(user)
    tools = {"enabled": True, "workdir": str(work)}
    try:
        await gateways.start(
            telegram_config(double, tmp, telegram={"allow_users": [str(user.id)]}, tools=tools)
        )
        await double.push_message(chat, user, "warm up")
        await double.wait_for(lambda: bool(double.view(chat.id)), 30)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.monotonic()
        await double.push_message(chat, user, "!attach big.bin")
        await double.wait_for(lambda: bool(double.files_sent(chat.id)), 300)
        took = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    finally:
        await gateways.stop_all()
        await double.stop()
    return {
        "mb": size / 1e6,
        "seconds": round(took, 2),
        "peak_rss_growth_mb": round((after - before) / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=20.0)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(int(args.mb * 1e6)))))


if __name__ == "__main__":
    main()
