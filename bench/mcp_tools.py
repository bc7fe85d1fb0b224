"""What MCP servers cost the gateway (issue 28): the SDK's import, a start, a call, a restart.

One process, the real owners (``agents/tools/mcp_hub.py``) over stdio: ``mcp-server-time``
from PyPI and the tests' probe server (``tests/support/mcp_probe_server.py``).

- ``import``: CPU seconds and RSS growth of importing the SDK modules the owners use, in a
  fresh interpreter (the gateway pays this only with ``agent.mcp.servers`` set, in a thread);
- ``start_s``: ``McpHub.start`` for both servers (spawn, initialize, list), per run;
- ``call_ms``: ``get_current_time`` calls, one after another (no approval: the owner alone);
- ``restart_s``: the probe killed mid-call by its ``die`` tool until the next call answers;
- ``close_s``: ``McpHub.close`` (stdin closed, processes reaped).

Prints one JSON object. ``--quick``: fewer runs and calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = str(ROOT / "tests" / "support" / "mcp_probe_server.py")
IMPORT_PROBE = """
import json, resource, time, psutil
p = psutil.Process(); rss = p.memory_info().rss; cpu = time.process_time()
import mcp, mcp.types, mcp.client.stdio, mcp.client.streamable_http, httpx2
print(json.dumps({"cpu_s": time.process_time() - cpu, "rss_mb": (p.memory_info().rss - rss) / 1e6}))
"""


def import_cost() -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout)
    return {k: round(v, 3) for k, v in result.items()}


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
    }


async def one_run(calls: int) -> dict[str, object]:
    from chatgate.agents.tools.mcp_hub import McpHub
    from chatgate.agents.tools.mcp_settings import McpServerSettings

    exe = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    if exe is None:
        raise SystemExit("mcp-server-time is not installed (pip install -e '.[test]')")
    env = {"PYTHONPATH": os.pathsep.join(sys.path)}
    hub = McpHub(
        [
            McpServerSettings(name="time", command=exe),
            McpServerSettings(
                name="probe", command=sys.executable, args=(PROBE,), env=env, restart_backoff_s=(0.5, 30)
            ),
        ]
    )
    started = time.perf_counter()
    await hub.start()
    start_s = time.perf_counter() - started
    time_owner, probe_owner = hub.owners["time"], hub.owners["probe"]
    latencies = []
    for _ in range(calls):
        began = time.perf_counter()
        outcome = await time_owner.call("get_current_time", {"timezone": "UTC"})
        latencies.append((time.perf_counter() - began) * 1000)
        assert outcome.ok, outcome.text
    began = time.perf_counter()
    died = await probe_owner.call("die", {})
    after = await probe_owner.call("echo", {"text": "back"})
    restart_s = time.perf_counter() - began
    assert not died.ok and after.ok, (died, after)
    began = time.perf_counter()
    await hub.close()
    return {
        "start_s": start_s,
        "call_ms": latencies,
        "restart_s": restart_s,
        "close_s": time.perf_counter() - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    runs, calls = (1, 20) if args.quick else (args.runs, args.calls)
    load_before = os.getloadavg()
    imports = import_cost()
    results = [asyncio.run(one_run(calls)) for _ in range(runs)]
    print(
        json.dumps(
            {
                "runs": runs,
                "import": imports,
                "start_s": percentiles([float(r["start_s"]) for r in results]),  # type: ignore[arg-type]
                "call_ms": percentiles([x for r in results for x in r["call_ms"]]),  # type: ignore[attr-defined]
                "restart_s": percentiles([float(r["restart_s"]) for r in results]),  # type: ignore[arg-type]
                "close_s": percentiles([float(r["close_s"]) for r in results]),  # type: ignore[arg-type]
                "load_average": {"before": load_before, "after": os.getloadavg()},
            }
        )
    )


if __name__ == "__main__":
    main()
