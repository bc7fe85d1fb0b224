"""Delivery claims under a ``pg_terminate_backend`` storm: how many rows end stuck ``sending``
(issue 32, finding 2).

One ``PostgresStore`` on the real server runs a claim-and-settle loop over ``--chats`` chats
(it enqueues 20 rows, claims up to 50, settles each ``sent``) while a second connection
terminates every backend of that store every 50 ms for ``--seconds``. Then the storm stops
and the same process goes on claiming for 3 s with nothing of its own in flight. A row
still ``sending`` then is held by a live process that is not sending it: its chat waits for
the outbox lease (300 s). ``--src DIR`` imports chatgate from another checkout's ``src/``
(run a baseline tree that way).

Prints one JSON object (kills, claims and settlements that failed, rows stuck ``sending``
and their lease left); exits 1 if any row is stuck.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dsn", default=os.environ.get("CHATGATE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--schema", default=f"bench_storm_{os.getpid()}")
    parser.add_argument("--src", help="import chatgate from this src/ directory first")
    parser.add_argument("--quick", action="store_true", help="3 s of storm")
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
    if args.quick:
        args.seconds = 3.0
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    result = asyncio.run(_run(args))
    print(json.dumps(result))
    return 1 if result["stuck_sending"] else 0


async def _run(args: argparse.Namespace) -> dict[str, object]:
    import asyncpg

    import chatgate
    from chatgate.domain.errors import StoreUnavailable
    from chatgate.domain.outbox import OutboxDraft, OutboxSettlement
    from chatgate.store.postgres import PostgresStore

    admin = await asyncpg.connect(args.dsn)
    store = PostgresStore(args.dsn, schema=args.schema)
    await store.open()
    stop = asyncio.Event()
    counts = {"enqueued": 0, "settled": 0, "claim_failures": 0, "settle_failures": 0, "kills": 0}

    def draft(i: int) -> OutboxDraft:
        chat = f"c{i % args.chats}"
        return OutboxDraft(
            idem_key=f"r{i}", platform="webchat", chat_id=chat, session_key=f"k-{chat}",
            kind="final", text="x", in_reply_to="m", target={},
        )  # fmt: skip

    async def settle(rows: list) -> None:  # type: ignore[type-arg]
        for row in rows:
            try:
                await store.settle_outbox([OutboxSettlement(row.id, "sent")])
                counts["settled"] += 1
            except StoreUnavailable:
                counts["settle_failures"] += 1

    async def deliver() -> None:
        while not stop.is_set():
            try:
                n = counts["enqueued"]
                await store.enqueue_outbox([draft(i) for i in range(n, n + 20)])
                counts["enqueued"] = n + 20
                rows = await store.claim_outbox(50)
            except StoreUnavailable:
                counts["claim_failures"] += 1
                await asyncio.sleep(0.01)
                continue
            await settle(rows)

    async def storm() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.05)
            killed = await admin.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                f"chatgate {store.holder}",
            )
            counts["kills"] += len(killed)

    try:
        tasks = [asyncio.create_task(deliver()), asyncio.create_task(storm())]
        await asyncio.sleep(args.seconds)
        stop.set()
        await asyncio.gather(*tasks)
        calm = time.monotonic() + 3.0
        while time.monotonic() < calm:
            with contextlib.suppress(StoreUnavailable):
                await settle(await store.claim_outbox(256))
            await asyncio.sleep(0.1)
        stuck = await admin.fetch(
            f'SELECT sending_expires - extract(epoch from now()) AS left FROM "{args.schema}".outbox'
            " WHERE status = 'sending'"
        )
    finally:
        await store.close()
        await admin.execute(f'DROP SCHEMA IF EXISTS "{args.schema}" CASCADE')
        await admin.close()
    return {
        "chatgate": os.path.dirname(chatgate.__file__),
        "seconds": args.seconds,
        **counts,
        "stuck_sending": len(stuck),
        "stuck_lease_left_s": sorted(round(r["left"]) for r in stuck)[:10],
        "load_avg": os.getloadavg()[0],
    }


if __name__ == "__main__":
    sys.exit(main())
