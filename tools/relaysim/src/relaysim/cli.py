"""``chatgate-relay-sim``: run the relay connector simulator until SIGINT or SIGTERM.

The console script of the ``chatgate-relaysim`` distribution (``tools/relaysim``);
``python -m relaysim`` runs the same ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from chatgate.app.logs import setup_logging
from relaysim.buffer import BufferUnavailable
from relaysim.server import RelaySimulator

DEFAULT_SECRET_ENV = "CHATGATE_RELAY_SECRET"  # what the gateway's platforms.relay.secret_env suggests
EX_CONFIG = 78


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8787, help="port for /relay and /sim/ (default 8787)")
    parser.add_argument("--db", default="./relay-sim.db", help="SQLite file of the durable inbound buffer")
    parser.add_argument(
        "--gateway-id", default="local", help="the gateway id tokens must name (default local)"
    )
    parser.add_argument(
        "--secret-env",
        default=DEFAULT_SECRET_ENV,
        help=f"environment variable holding the gateway's secret (default {DEFAULT_SECRET_ENV})",
    )
    parser.add_argument(
        "--platform",
        action="append",
        dest="platforms",
        metavar="NAME",
        help="platform to front; repeat for several (default discord)",
    )
    parser.add_argument(
        "--supported-ops",
        help="comma list advertised as supported_ops on every platform (default: absent, the legacy set)",
    )
    parser.add_argument(
        "--ack-timeout", type=float, default=5.0, help="seconds a replay waits for each inbound_ack"
    )
    parser.add_argument(
        "--allow-remote-control",
        action="store_true",
        help="serve the /sim/ control routes to non-loopback clients too",
    )
    parser.add_argument("--log-level", default="INFO", type=str.upper)
    parser.add_argument("--log-format", choices=("text", "json"), default="text")


def platform_descriptors(args: argparse.Namespace) -> list[dict[str, Any]]:
    names = list(dict.fromkeys(args.platforms or ["discord"]))
    ops = [op.strip() for op in (args.supported_ops or "").split(",") if op.strip()]
    return [{"platform": name, **({"supported_ops": ops} if ops else {})} for name in names]


async def run(args: argparse.Namespace) -> int:
    """Start, print where to connect, serve until a signal, stop. Returns the exit code."""
    secret = os.environ.get(args.secret_env)
    if not secret:
        print(
            f"chatgate-relay-sim: environment variable {args.secret_env} is not set; put the gateway's"
            f" relay secret in it (or name another variable with --secret-env)",
            file=sys.stderr,
        )
        return EX_CONFIG
    try:
        sim = RelaySimulator(
            args.db,
            secrets={args.gateway_id: [secret]},
            platforms=platform_descriptors(args),
            ack_timeout=args.ack_timeout,
            allow_remote_control=args.allow_remote_control,
        )
    except ValueError as exc:
        print(f"chatgate-relay-sim: {exc}", file=sys.stderr)
        return EX_CONFIG
    try:
        base = await sim.start(args.host, args.port)
    except OSError as exc:
        print(
            f"chatgate-relay-sim: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr
        )
        return 1
    except BufferUnavailable as exc:
        print(f"chatgate-relay-sim: {exc}", file=sys.stderr)
        return 1
    print(
        f"relay-sim listening. Gateway settings (platforms.relay): url={sim.relay_url}"
        f" gateway_id={args.gateway_id} secret_env={args.secret_env} platforms={','.join(sim.descriptors)}"
        f"  control={base}/sim/ db={args.db}",
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await sim.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="chatgate-relay-sim", description="A local relay connector (Hermes relay contract v1)."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
