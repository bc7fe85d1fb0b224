"""Store writes and commits per message through the real engine on SQLite (issue 13).

One process: ``build_engine`` over a real ``SqliteStore`` file (``synchronous=FULL``, WAL)
with the echo agent (no delay) and a recording adapter, default engine settings. Messages
are admitted one at a time, over ``--chats`` chats, each after the previous reply was sent
and settled, so every write of a message is counted alone (group commit has nothing to
merge). The store's ``on_commit`` hook counts the transactions and the writes in them.

``--baseline-src DIR`` runs the same in a subprocess importing chatgate from another
checkout's ``src/`` first, interleaved (baseline, this tree, baseline, ...).

Prints one JSON object: per tree, ``writes_per_message`` (queued writes: admission, session
claim, turn commit, row claim, settlement, and the empty claims a wake-up makes),
``commits_per_message`` (transactions), ``bytes_written_per_message`` (each commit writes
every page it changed to the WAL whole; see ``bytes_written``) and
``writer_busy_ms_per_message`` (wall time the writer spent in transactions, their fsyncs
included: on a disk whose fsync is slow this is what bounds the messages a second), medians
over ``--runs``. Exits 1 unless every message got exactly one reply. CPU figures are left out
on purpose: in one process with the client, on a shared machine, they were noise;
``telegram.py`` measures those.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def measure(messages: int, chats: int) -> dict[str, object]:
    sys.path.insert(0, str(ROOT / "tests"))
    import chatgate
    from chatgate.agents.echo import EchoAgent
    from chatgate.engine.authz import PlatformAccess
    from chatgate.engine.metrics import GatewayMetrics
    from chatgate.engine.pipeline import EngineSettings, build_engine
    from chatgate.store.sqlite import SqliteStore
    from support.engine_harness import PLATFORM, RecordingAdapter, make_inbound, wait_until

    batches: list[int] = []
    busy: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-commits-") as tmp:
        store = SqliteStore(
            Path(tmp) / "chatgate.db", on_commit=lambda size, s: (batches.append(size), busy.append(s))
        )
        adapter = RecordingAdapter()
        settings = EngineSettings(owner="bench", access={PLATFORM: PlatformAccess(allow_all=True)})
        engine = build_engine(
            store, EchoAgent(chunk_delay_ms=0), settings, GatewayMetrics(), {PLATFORM: adapter}
        )
        await engine.open()
        engine.start()
        await asyncio.sleep(0.3)  # the start's own claims
        batches.clear()
        busy.clear()
        written = bytes_written()
        for i in range(messages):
            await engine.admission.admit(make_inbound(f"m{i}", chat_id=f"c{i % chats}"))
            await wait_until(lambda: len(adapter.delivered) > i, 30.0, f"the reply to m{i}")  # noqa: B023
            await asyncio.sleep(0.03)  # its settlement, and the claims it wakes, commit first
        counted, busy_s = list(batches), sum(busy)
        written = None if written is None else (bytes_written() or 0) - written
        await engine.stop(1.0, 1.0)
        await store.close()
    replies = [r.text for r in adapter.delivered]
    return {
        "chatgate": str(Path(chatgate.__file__).parent),
        "writes_per_message": sum(counted) / messages,
        "commits_per_message": len(counted) / messages,
        "writer_busy_ms_per_message": round(busy_s / messages * 1000, 3),
        "bytes_written_per_message": None if written is None else round(written / messages),
        "correct": sorted(replies) == sorted(f"echo: m{i}" for i in range(messages)),
    }


def bytes_written() -> int | None:
    """What this process has written through ``write``-family calls (``/proc/self/io``'s
    ``wchar``; Linux only). The engine here talks to no socket, so it is the store's WAL
    frames (a whole page each, however little of it changed) and its checkpoints."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def run_tree(src: str | None, messages: int, chats: int) -> dict[str, object]:
    if src is None:
        return asyncio.run(measure(messages, chats))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, __file__, "--messages", str(messages), "--chats", str(chats), "--one"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=200)
    p.add_argument("--chats", type=int, default=10)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--baseline-src", default=None, help="another checkout's src/, measured interleaved")
    p.add_argument("--quick", action="store_true", help="20 messages, one run")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.messages, args.runs = 20, 1
    if args.one:
        print(json.dumps(asyncio.run(measure(args.messages, args.chats))))
        return 0
    trees = {"baseline": args.baseline_src} if args.baseline_src else {}
    trees["chatgate"] = str(ROOT / "src")
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
    for n in range(args.runs):
        for name, src in trees.items():
            print(f"[commits] run {n + 1}/{args.runs}: {name}", file=sys.stderr)
            runs[name].append(run_tree(src, args.messages, args.chats))
    out: dict[str, object] = {"messages": args.messages, "chats": args.chats, "load_average": os.getloadavg()}
    for name, results in runs.items():
        out[name] = {
            key: statistics.median(float(r[key]) for r in results)  # type: ignore[arg-type]
            for key in (
                "writes_per_message",
                "commits_per_message",
                "bytes_written_per_message",
                "writer_busy_ms_per_message",
            )
            if all(r.get(key) is not None for r in results)
        } | {"chatgate": results[0]["chatgate"], "runs": results}
    out["correct"] = all(r["correct"] for results in runs.values() for r in results)
    print(json.dumps(out, indent=2))
    return 0 if out["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
