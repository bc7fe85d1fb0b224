#!/usr/bin/env python
"""The Telegram path against its floor: the gateway and a bare echo bot on the same Bot API double.

Subjects, each a subprocess polling the project's Bot API double
(``tests/platforms/telegram_double.py``, in this process on 127.0.0.1), run interleaved
(gateway, bare, gateway, bare, … ``--runs`` each) under the same load: N messages over C
private chats at R messages/s, chat ``i % C`` for message ``i``.

- ``gateway``: ``<python> -m chatgate.app.cli run`` with only Telegram enabled and the
  ``openai`` agent pointed at an instant OpenAI-compatible fake (``tests/agents/
  fake_openai_server.py``, in this process; ``--agent echo`` for the echo agent instead).
- ``bare``: ``bench/telegram_echo_bot.py``, an echo bot on the gateway's own Bot API
  client (``chatgate.platforms.telegram.botapi``) that stores nothing.
- ``durable``: ``bench/telegram_durable_bot.py``, the least a durable gateway does: the
  same client, one call to the same fake model through the gateway agent's SDK path, and
  one SQLite commit at ``synchronous=FULL`` per message before it answers (only with the
  ``openai`` agent). It holds the poll until the batch is answered: durable only because
  Telegram redelivers what was not acknowledged, so one slow answer would stall every chat.
- ``durable_acked``: the same bot with ``--ack-first``, the least a gateway that must not
  stall does: the message committed and acknowledged before the model call, the answer
  committed before it is sent. Two ``FULL`` commits a message, as the gateway's contract
  needs (``ratios_to_durable_acked``; ``floor_cost_of_acking_first`` is its ratio to
  ``durable``).
- ``baseline`` (with ``--baseline-src DIR``): the gateway again, importing chatgate from
  another checkout's ``src/`` (e.g. main's), so old and new run interleaved in one run.

Before the runs every tree the subjects import from (this one's ``src/``, and
``--gateway-src``) is byte-compiled (``compileall``), as an installed wheel is: with
``PYTHONDONTWRITEBYTECODE`` set, an editable checkout would otherwise compile every module
at every start (``--no-compile`` keeps that).

Per run: first reply latency (the double holding a message to its first ``sendMessage``
into that chat), the subject's CPU (``/proc/<pid>/stat`` utime+stime, so other load on
the machine does not count) from the first message to one second after the last reply,
divided by the messages, and the main thread's share of it (the event loop; the rest is
the other threads': the gateway's SQLite writer and readers, the floor's journal); peak
RSS (``VmHWM``); and start to first poll (exec to the double's first ``getUpdates`` from
it). The load starts ``--settle`` seconds after the first poll (the gateway's OpenAI SDK
import finishes in the background meanwhile).
Prints one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e import (  # bench/ is sys.path[0]
    byte_compile,
    cpu_seconds,
    drain,
    log_problems,
    peak_rss_mb,
    percentile,
    stop_gateway,
    thread_cpu,
    thread_cpu_split,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "platforms"))  # the Bot API double lives with the tests
sys.path.insert(0, str(ROOT / "tests" / "agents"))  # and so does the fake OpenAI endpoint

from fake_openai_server import FakeOpenAIServer, Reply  # noqa: E402
from telegram_double import TOKEN, BotApiDouble, User, private  # noqa: E402

TOKEN_ENV = "BENCH_TELEGRAM_TOKEN"
MODEL_KEY_ENV = "BENCH_OPENAI_KEY"
MODEL_REPLY = "Sure: here is a short answer from the model."
LONG_REPLY_LINE = (
    "Here is **how** it works: each `session` has its own row, and a reply is _streamed_ "
    "as edits (see [the docs](https://example.org/docs)); 2 * 3 < 7 & snake_case stays.\n"
)


def model_reply(chars: int | None) -> str:
    """The fake model's answer: the one-liner, or ``chars`` characters of Markdown a model writes."""
    return MODEL_REPLY if chars is None else (LONG_REPLY_LINE * (chars // len(LONG_REPLY_LINE) + 1))[:chars]


SUBJECTS = ("gateway", "bare", "durable", "durable_acked")
FLOORS = ("durable", "durable_acked")  # they call the model, so only with --agent openai


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def gateway_config(args: argparse.Namespace, tmp: Path, api_base: str, model_base: str | None) -> Any:
    agent: dict[str, Any] = {"kind": "echo", "echo": {"chunk_delay_ms": 0}}
    if model_base is not None:
        agent = {"kind": "openai", "openai": {"base_url": model_base, "api_key_env": MODEL_KEY_ENV}}
    return {
        "log_level": "INFO",
        "http": {"host": "127.0.0.1"},
        "agent": agent,
        "platforms": {
            "web": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token_env": TOKEN_ENV,
                "allow_users": [str(u.id) for u in bench_users(args)],
                "api_base": api_base,
                "poll_timeout_seconds": 25,
            },
        },
        "locks": {"credential_dir": str(tmp / "locks")},
        "shutdown": {"drain_seconds": 2, "outbox_flush_seconds": 1, "hard_deadline_seconds": 30},
    }


class Watch:
    """Wraps the double's getUpdates and sendMessage: first poll, and each message's first reply."""

    def __init__(self, double: BotApiDouble) -> None:
        self.first_poll: float | None = None
        self.waiting: dict[int, collections.deque[float]] = collections.defaultdict(collections.deque)
        self.latencies: list[float] = []
        self.extra_sends = 0
        self.last_reply = 0.0
        self.answered = asyncio.Event()
        self.expected = 0
        poll, send = double._m_getUpdates, double._m_sendMessage

        async def get_updates(params: dict[str, Any]) -> Any:
            if self.first_poll is None:
                self.first_poll = time.perf_counter()
            return await poll(params)

        async def send_message(params: dict[str, Any]) -> Any:
            response = await send(params)
            now = time.perf_counter()
            queue = self.waiting.get(int(params["chat_id"]))
            if response.status == 200 and queue:
                self.latencies.append(now - queue.popleft())
                self.last_reply = now
                if len(self.latencies) == self.expected:
                    self.answered.set()
            elif response.status == 200:
                self.extra_sends += 1
            return response

        double._m_getUpdates = get_updates  # type: ignore[method-assign]
        double._m_sendMessage = send_message  # type: ignore[method-assign]


def command(subject: str, args: argparse.Namespace, tmp: Path, base: str, model: str | None) -> list[str]:
    if subject == "bare":
        return [args.python, str(ROOT / "bench" / "telegram_echo_bot.py"), base]
    if subject in FLOORS:
        assert model is not None
        flags = ["--ack-first"] if subject == "durable_acked" else []
        return [
            args.python,
            str(ROOT / "bench" / "telegram_durable_bot.py"),
            *flags,
            base,
            model,
            str(tmp / "floor.db"),
        ]
    config = tmp / "chatgate.yaml"
    config.write_text(json.dumps(gateway_config(args, tmp, base, model)), encoding="utf-8")  # JSON is YAML
    state = str(tmp / "state")
    return [args.python, "-m", "chatgate.app.cli", "run", "--config", str(config), "--state-dir", state]


def bench_users(args: argparse.Namespace) -> list[User]:
    return [User(200_000 + c, f"User{c}", username=f"user{c}") for c in range(args.chats)]


async def load(double: BotApiDouble, watch: Watch, args: argparse.Namespace) -> None:
    users = bench_users(args)
    started = time.perf_counter()
    for i in range(args.messages):
        await asyncio.sleep(max(0.0, started + i / args.rate - time.perf_counter()))
        user = users[i % args.chats]
        watch.waiting[user.id].append(time.perf_counter())
        await double.push_message(private(user), user, f"message {i // args.chats} from {user.first_name}")


async def one_run(subject: str, args: argparse.Namespace, model: str | None) -> dict[str, Any]:
    double = BotApiDouble()
    watch = Watch(double)
    watch.expected = args.messages
    await double.start()
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-tg-{subject}-", dir=args.dir))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env |= {TOKEN_ENV: TOKEN, MODEL_KEY_ENV: "sk-bench"}
    src = {"gateway": args.gateway_src, "baseline": args.baseline_src}.get(subject)
    if src:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    err = (tmp / "subject.log").open("wb")
    execed = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *command(subject, args, tmp, double.base, model),
        stdout=asyncio.subprocess.PIPE, stderr=err, env=env, start_new_session=True,
    )  # fmt: skip
    err.close()
    drainer = asyncio.create_task(drain(proc.stdout))
    try:
        async with asyncio.timeout(60):
            while watch.first_poll is None:
                if proc.returncode is not None:
                    raise RuntimeError(f"{subject} exited: {(tmp / 'subject.log').read_text()[-2000:]}")
                await asyncio.sleep(0.005)
        start_cpu = cpu_seconds(proc.pid)  # robust against other load, unlike the wall time
        await asyncio.sleep(args.settle)  # the start-up's tail: setMyCommands, the agent's SDK import
        cpu0, threads0 = cpu_seconds(proc.pid), thread_cpu(proc.pid)
        await load(double, watch, args)
        try:
            await asyncio.wait_for(watch.answered.wait(), args.timeout)
        except TimeoutError:
            log(f"[telegram] {subject}: only {len(watch.latencies)} of {args.messages} answered")
        await asyncio.sleep(1.0)  # the work after the last reply (its ledger row) counts too
        cpu = cpu_seconds(proc.pid) - cpu0
        threads = thread_cpu_split(threads0, thread_cpu(proc.pid), proc.pid, args.messages)
        rss = peak_rss_mb(proc.pid)
    finally:
        shutdown = await stop_gateway(proc, 30)
        await drainer
        await double.stop()
        problems = log_problems(tmp / "subject.log") if subject in ("gateway", "baseline") else None
        shutil.rmtree(tmp, ignore_errors=True)
    ordered = sorted(watch.latencies)
    assert watch.first_poll is not None
    return {
        "subject": subject,
        "answered": len(ordered),
        "extra_sends": watch.extra_sends,
        "first_reply_ms": {
            q: round(percentile(ordered, v) * 1000, 2) if ordered else None
            for q, v in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
        },
        "cpu_ms_per_message": round(cpu * 1000 / args.messages, 3),
        "main_thread_cpu_ms_per_message": threads[0],
        "thread_cpu_ms_per_message": threads,
        "peak_rss_mb": rss,
        "start_to_first_poll_s": round(watch.first_poll - execed, 3),
        "start_cpu_s": round(start_cpu, 3),
        "shutdown": shutdown,
        "log": problems,
        "correct": len(ordered) == args.messages and watch.extra_sends == 0 and shutdown["exit_code"] == 0,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str, sub: str | None = None) -> float | None:
        values = [r[key][sub] if sub else r[key] for r in runs]
        values = [v for v in values if v is not None]
        return round(statistics.median(values), 3) if values else None

    return {
        "first_reply_p50_ms": med("first_reply_ms", "p50"),
        "first_reply_p99_ms": med("first_reply_ms", "p99"),
        "cpu_ms_per_message": med("cpu_ms_per_message"),
        "main_thread_cpu_ms_per_message": med("main_thread_cpu_ms_per_message"),
        "peak_rss_mb": med("peak_rss_mb"),
        "start_to_first_poll_s": med("start_to_first_poll_s"),
        "start_cpu_s": med("start_cpu_s"),
        "runs": runs,
    }


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def paired(runs: list[dict[str, Any]], floors: list[dict[str, Any]]) -> dict[str, Any]:
    """The gateway over a floor round by round (each pair ran back to back, so a machine that
    slowed between rounds moves both): the median, least and greatest of the rounds' ratios."""

    def spread(figure: Callable[[dict[str, Any]], float | None]) -> dict[str, Any] | None:
        values = [ratio(figure(g), figure(f)) for g, f in zip(runs, floors, strict=True)]
        known = [v for v in values if v is not None]
        if len(known) < len(values):
            return None
        return {"median": round(statistics.median(known), 2), "min": min(known), "max": max(known)}

    return {
        "cpu_ms_per_message": spread(lambda r: r["cpu_ms_per_message"]),
        "first_reply_p50_ms": spread(lambda r: r["first_reply_ms"]["p50"]),
    }


def compile_subject_trees(args: argparse.Namespace) -> list[str]:
    trees = [str(ROOT / "src"), *(t for t in (args.gateway_src, args.baseline_src) if t)]
    if args.no_compile:
        return []
    byte_compile(args.python, trees)
    return trees


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    compiled = compile_subject_trees(args)
    subjects = [s for s in SUBJECTS if s not in FLOORS or args.agent == "openai"]
    if args.baseline_src:
        subjects.insert(0, "baseline")
    model: FakeOpenAIServer | None = None
    if args.agent == "openai":
        model = FakeOpenAIServer(behaviours=[Reply(model_reply(args.reply_chars), chunks=args.chunks)])
        model.start()
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in subjects}
    try:
        for rep in range(args.runs):
            for subject in subjects:
                log(f"[telegram] run {rep + 1}/{args.runs}: {subject}")
                runs[subject].append(await one_run(subject, args, model.base_url if model else None))
    finally:
        if model is not None:
            model.stop()
    summary = {s: summarize(rs) for s, rs in runs.items()}
    gateway, bare = summary["gateway"], summary["bare"]
    keys = (
        "cpu_ms_per_message",
        "main_thread_cpu_ms_per_message",
        "first_reply_p50_ms",
        "first_reply_p99_ms",
        "peak_rss_mb",
        "start_cpu_s",
    )
    ratios = {key: ratio(gateway[key], bare[key]) for key in keys}
    durable, baseline = summary.get("durable"), summary.get("baseline")
    to_durable = {key: ratio(gateway[key], durable[key]) for key in keys} if durable else None
    acked = summary.get("durable_acked")
    to_acked = {key: ratio(gateway[key], acked[key]) for key in keys} if acked else None
    acking_cost = {key: ratio(acked[key], durable[key]) for key in keys} if acked and durable else None
    paired_to_durable = paired(runs["gateway"], runs["durable"]) if durable else None
    against_baseline = None
    if baseline is not None:
        against_baseline = {
            "gateway_to_baseline": {key: ratio(gateway[key], baseline[key]) for key in keys},
            "baseline_to_bare": {key: ratio(baseline[key], bare[key]) for key in keys},
            "baseline_to_durable": {key: ratio(baseline[key], durable[key]) for key in keys}
            if durable
            else None,
        }
    return {
        "workload": {
            "messages": args.messages,
            "chats": args.chats,
            "rate_per_s": args.rate,
            "runs": args.runs,
            "agent": args.agent,
            "reply_chars": len(model_reply(args.reply_chars)),
            "chunks": args.chunks,
            "gateway_src": args.gateway_src,
            "baseline_src": args.baseline_src,
            "byte_compiled": compiled,
        },
        "load_average": {"before": [round(x, 2) for x in load_before], "after": list(os.getloadavg())},
        **summary,
        "ratios": ratios,
        "ratios_to_durable": to_durable,
        "paired_to_durable": paired_to_durable,
        "ratios_to_durable_acked": to_acked,
        "floor_cost_of_acking_first": acking_cost,
        "ratios_baseline": against_baseline,
        "targets": {
            "cpu_per_message_le_1_5x": ratios["cpu_ms_per_message"] is not None
            and ratios["cpu_ms_per_message"] <= 1.5,
            "p50_le_2x": ratios["first_reply_p50_ms"] is not None and ratios["first_reply_p50_ms"] <= 2.0,
            "gateway_rss_le_90_mb": gateway["peak_rss_mb"] is not None and gateway["peak_rss_mb"] <= 90,
            "gateway_first_poll_le_0_5_s": gateway["start_to_first_poll_s"] is not None
            and gateway["start_to_first_poll_s"] <= 0.5,
        },
        "targets_issue_33": {
            "gateway_rss_le_60_mb": gateway["peak_rss_mb"] is not None and gateway["peak_rss_mb"] <= 60,
            "cpu_per_message_le_1_5x_durable": _at_most((to_durable or {}).get("cpu_ms_per_message"), 1.5),
            "p50_le_1_3x_durable": _at_most((to_durable or {}).get("first_reply_p50_ms"), 1.3),
        },
        "correct": all(r["correct"] for rs in runs.values() for r in rs),
    }


def _at_most(ratio: float | None, limit: float) -> bool | None:
    """Whether a ratio is within its limit; None when it was not measured (``--agent echo``)."""
    return None if ratio is None else ratio <= limit


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=500)
    p.add_argument("--chats", type=int, default=50)
    p.add_argument("--rate", type=float, default=10.0, help="messages per second over all chats")
    p.add_argument("--runs", type=int, default=2, help="runs of each subject, interleaved")
    p.add_argument("--agent", choices=("openai", "echo"), default="openai")
    p.add_argument("--settle", type=float, default=3.0, help="seconds from first poll to the load")
    p.add_argument(
        "--reply-chars", type=int, default=None, help="a Markdown answer this long, not the one-liner"
    )
    p.add_argument("--chunks", type=int, default=1, help="stream the model's answer in this many pieces")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the last reply")
    p.add_argument("--python", default=sys.executable, help="the interpreter of both subjects")
    p.add_argument("--gateway-src", default=None, help="put this checkout's src/ first for the gateway")
    p.add_argument("--baseline-src", default=None, help="also run a gateway from this checkout's src/")
    p.add_argument("--dir", default=None, help="where the gateway's state goes (default: system temp)")
    p.add_argument("--no-compile", action="store_true", help="do not byte-compile the trees first")
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    args = p.parse_args(argv)
    if args.quick:  # 40 messages: a bare bot's ~30 ms of CPU spans a few of the kernel's 10-ms ticks
        args.messages, args.chats, args.rate, args.runs, args.settle = 40, 10, 40.0, 1, 1.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(main_async(args))
    print(json.dumps(result, indent=2))
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
