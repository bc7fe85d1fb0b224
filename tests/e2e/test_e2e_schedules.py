"""A schedule across a SIGKILL, with a real ``chatgate run`` (issue 19's acceptance, scaled for CI).

A config schedule fires every 2 s into a web chat session (the echo agent answers each
firing). The gateway is SIGKILLed after a few firings and left down for 6 s (three slots),
then started again. The firings, read from the database file: the slots before the kill are
consecutive; after the restart exactly one firing stands for every slot missed while down
(the first missed one, admitted at start), then the firings are on the grid again with no
slot skipped; no slot fires twice and every firing is answered exactly once.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from chatgate.domain.schedules import firing_time
from support.procs import GatewayProcess, wait_until

pytestmark = pytest.mark.slow
INTERVAL = 2
# The full scenario (60 s, down for 10 s) is CHATGATE_SCHEDULE_BEFORE=13
# CHATGATE_SCHEDULE_DOWN=10 CHATGATE_SCHEDULE_AFTER=12; CI runs the scaled one.
BEFORE = int(os.environ.get("CHATGATE_SCHEDULE_BEFORE", "3"))
DOWN_SECONDS = float(os.environ.get("CHATGATE_SCHEDULE_DOWN", "6"))
AFTER = int(os.environ.get("CHATGATE_SCHEDULE_AFTER", "4"))
CONFIG = {
    "agent": {"echo": {"chunk_delay_ms": 0}},
    "schedules": {
        "jobs": {
            "tick": {"every": f"{INTERVAL}s", "text": "tick", "target": {"platform": "web", "chat_id": "t"}}
        }
    },
}


def firings(db: Path) -> list[tuple[float, int, float]]:
    """(slot time, inbox seq, admitted at) of every firing, by slot."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = conn.execute(
            "SELECT delivery_id, seq, admitted_at FROM inbox WHERE transport = 'schedule' ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    out = []
    for delivery_id, seq, admitted_at in rows:
        stamp = delivery_id.rsplit(":", 3)[-3:]
        slot = datetime.strptime(":".join(stamp), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        out.append((slot, seq, admitted_at))
    return sorted(out)


def finals_per_seq(db: Path) -> dict[int, int]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = conn.execute("SELECT idem_key FROM outbox WHERE kind = 'final'").fetchall()
    finally:
        conn.close()
    counts: dict[int, int] = {}
    for (key,) in rows:
        seq = int(key.split(":")[1])
        counts[seq] = counts.get(seq, 0) + 1
    return counts


def _all_answered(db: Path) -> Callable[[], bool]:
    def check() -> bool:
        answered = finals_per_seq(db)
        return all(answered.get(seq) == 1 for _, seq, _ in firings(db))

    return check


@pytest.mark.timeout(300)
async def test_a_schedule_killed_mid_run_catches_up_once_then_fires_on_time(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path, CONFIG)
    db = gateway.state_dir / "chatgate.db"
    await gateway.start()
    await wait_until(lambda: len(firings(db)) >= BEFORE, 30 + 4 * BEFORE, "firings before the kill")
    await gateway.kill()
    before = firings(db)
    killed_at = time.time()

    await asyncio.sleep(DOWN_SECONDS)  # the downtime itself is the scenario, not a wait for a condition
    restart_at = time.time()
    await gateway.start()
    await wait_until(
        lambda: len(firings(db)) >= len(before) + AFTER, 30 + 4 * AFTER, "firings after the restart"
    )
    # A firing admitted just before the stop may still be queued (kept for the next start, not
    # lost): stop only once every firing admitted so far has its answer.
    await wait_until(_all_answered(db), 60, "an answer to every firing so far")
    assert await gateway.terminate() == 0
    after = [f for f in firings(db) if f[2] >= restart_at]
    everything = firings(db)

    slots = [s for s, _, _ in before]
    assert slots == [slots[0] + INTERVAL * i for i in range(len(slots))], "on the grid before the kill"
    assert len(everything) == len(before) + len(after), "nothing admitted while the gateway was down"
    late = [s for s, _, _ in after if s < restart_at]
    on_time = [s for s, _, _ in after if s > restart_at]
    assert len(late) + len(on_time) == len(after)
    # The one catch-up firing is the first slot missed. (Only a kill that fell between a firing's
    # admission and the record of it leaves none: the restart then re-admits that same slot, which
    # the store recognizes as a duplicate, and that stands for the catch-up.)
    redelivered = f"the firing at {firing_time(slots[-1])} was admitted before" in gateway.logs()
    assert late == [slots[-1] + INTERVAL] or (late == [] and redelivered), (late, slots[-1])
    missed = [s for s in range(int(slots[-1]) + INTERVAL, int(restart_at), INTERVAL)]
    assert len(missed) >= 2, f"the downtime spanned several slots ({missed}; killed at {killed_at})"
    assert all(s > restart_at for s in on_time), "no slot missed while down fired again"
    assert on_time == [on_time[0] + INTERVAL * i for i in range(len(on_time))], "then on the grid"
    assert len({s for s, _, _ in everything}) == len(everything), "no slot fired twice"
    answered = finals_per_seq(db)
    assert [answered.get(seq) for _, seq, _ in everything] == [1] * len(everything), "each answered once"
