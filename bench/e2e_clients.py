"""The client side of bench/e2e.py: one real WebSocket client per chat.

Each chat says hello, waits for ``ready``, then keeps up to ``window`` messages
waiting for their final, confirms every final with ``received`` and checks it:
exactly one final per message, with a fresh message id, text ``echo: <text>``,
in the chat's send order. Runs in the benchmark process or in worker processes
(``client_process``, for ``multiprocessing`` with the spawn start method).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import connect


@dataclass(frozen=True)
class ClientSpec:
    port: int
    messages: int
    window: int
    text_chars: int
    timeout: float
    compression: str | None  # "deflate" or None
    interval: float = 0.0
    """Seconds between one chat's sends (paced load); 0: send as soon as the window allows."""

    @property
    def uri(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"


def text_for(chat_id: str, i: int, pad: int) -> str:
    base = f"hello from {chat_id}, message #{i}"
    return base + " " + "x" * (pad - len(base) - 1) if pad > len(base) + 1 else base


class _Chat:
    """The state and checks of one chat's conversation."""

    def __init__(self, chat_id: str, spec: ClientSpec) -> None:
        self.chat_id = chat_id
        self.spec = spec
        self.finals = self.acks = self.drafts = self.notices = 0
        self.errors: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.latencies: list[float] = []
        self.ack_latencies: list[float] = []
        self.first_send: float | None = None
        self.last_final: float | None = None
        self.sent_at: dict[str, float] = {}
        self.awaiting: deque[str] = deque()  # sent, no final yet, in send order
        self.acked: set[str] = set()
        self.final_ids: set[str] = set()
        self.answered: set[str] = set()
        self.next_i = 0

    def next_message(self) -> str:
        msg_id = f"m{self.next_i}"
        text = text_for(self.chat_id, self.next_i, self.spec.text_chars)
        self.next_i += 1
        now = time.monotonic()
        if self.first_send is None:
            self.first_send = now
        self.sent_at[msg_id] = now
        self.awaiting.append(msg_id)
        return json.dumps({"type": "message", "id": msg_id, "text": text})

    def on_ack(self, frame: dict[str, Any], now: float) -> None:
        ident = frame.get("id")
        self.acks += 1
        if ident in self.acked:
            self.problems.append(f"{self.chat_id}: second ack for {ident}")
        elif ident not in self.sent_at:
            self.problems.append(f"{self.chat_id}: ack for unknown id {ident}")
        else:
            self.acked.add(ident)
            self.ack_latencies.append(now - self.sent_at[ident])
        if frame.get("duplicate"):
            self.problems.append(f"{self.chat_id}: ack for {ident} says duplicate")

    def on_final(self, frame: dict[str, Any], now: float) -> bool:
        """Check one final; True when it answered a message (so the next may be sent)."""
        self.finals += 1
        message_id, reply_to = str(frame.get("message_id")), frame.get("in_reply_to")
        if message_id in self.final_ids:
            self.problems.append(f"{self.chat_id}: final {message_id} delivered twice (re {reply_to})")
            return False
        self.final_ids.add(message_id)
        if reply_to in self.answered:
            self.problems.append(f"{self.chat_id}: second distinct final {message_id} for {reply_to}")
            return False
        if not self.awaiting or reply_to != self.awaiting[0]:
            head = self.awaiting[0] if self.awaiting else None
            self.problems.append(f"{self.chat_id}: final for {reply_to} arrived while {head} was oldest")
            if reply_to not in self.awaiting:
                return False
        assert isinstance(reply_to, str)
        self.awaiting.remove(reply_to)
        self.answered.add(reply_to)
        expected = "echo: " + text_for(self.chat_id, int(reply_to[1:]), self.spec.text_chars)
        if frame.get("text") != expected:
            self.problems.append(f"{self.chat_id}: final for {reply_to} has text {frame.get('text')!r}")
        self.latencies.append(now - self.sent_at[reply_to])
        self.last_final = now
        return True

    def on_error(self, frame: dict[str, Any]) -> bool:
        """Record an error frame; True when it refused a message (which then never gets a final)."""
        self.errors.append(frame)
        self.problems.append(f"{self.chat_id}: error frame {frame}")
        ident = frame.get("id")
        if ident in self.sent_at and ident not in self.answered:
            self.answered.add(ident)
            with contextlib.suppress(ValueError):
                self.awaiting.remove(ident)
            return True
        return False


async def chat_client(
    chat_id: str, spec: ClientSpec, go: asyncio.Event, connected: asyncio.Queue[str]
) -> _Chat:
    chat = _Chat(chat_id, spec)
    async with connect(
        spec.uri,
        max_size=None,
        ping_interval=None,
        open_timeout=30,
        close_timeout=10,
        compression=spec.compression,
    ) as ws:
        await ws.send(json.dumps({"type": "hello", "chat_id": chat_id, "user_id": f"u-{chat_id}"}))
        while True:
            frame = json.loads(await ws.recv())
            if frame.get("type") == "ready":
                break
            if frame.get("type") in ("final", "notice"):
                chat.problems.append(f"{chat_id}: backlog frame before any message: {frame}")
        await connected.put(chat_id)
        await go.wait()
        slots = asyncio.Semaphore(spec.window)  # a message takes a slot until its final arrives

        async def sender() -> None:
            start = time.monotonic() + spec.interval * random.Random(chat_id).random()
            for i in range(spec.messages):
                await slots.acquire()
                if spec.interval:
                    delay = start + i * spec.interval - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await ws.send(chat.next_message())

        sending = asyncio.create_task(sender())
        try:
            while len(chat.answered) < spec.messages:
                frame = json.loads(await ws.recv())
                now = time.monotonic()
                kind = frame.get("type")
                if kind == "ack":
                    chat.on_ack(frame, now)
                elif kind == "draft":
                    chat.drafts += 1
                elif kind in ("final", "notice"):
                    await ws.send(json.dumps({"type": "received", "message_id": frame.get("message_id")}))
                    if kind == "notice":
                        chat.notices += 1
                        chat.problems.append(f"{chat_id}: notice {frame.get('text')!r}")
                    elif chat.on_final(frame, now):
                        slots.release()
                elif kind == "error":
                    if chat.on_error(frame):
                        slots.release()
                else:
                    chat.problems.append(f"{chat_id}: unknown frame {frame}")
        finally:
            if not sending.done():
                sending.cancel()
            await asyncio.gather(sending, return_exceptions=True)
        unacked = sorted(set(chat.sent_at) - chat.acked)
        if unacked:
            chat.problems.append(f"{chat_id}: {len(unacked)} message(s) never acked")
    return chat


async def run_clients(
    chat_ids: list[str],
    spec: ClientSpec,
    on_connected: Callable[[], Awaitable[None]],
    wait_go: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """All chats of one client process: connect all, then go; returns merged figures."""
    go = asyncio.Event()
    connected: asyncio.Queue[str] = asyncio.Queue()
    cpu0 = time.process_time()
    tasks = [asyncio.create_task(chat_client(c, spec, go, connected)) for c in chat_ids]
    for _ in chat_ids:
        getter = asyncio.ensure_future(connected.get())
        early, _ = await asyncio.wait([getter, *tasks], timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if getter not in early:
            getter.cancel()
            for t in tasks:
                if t.done():
                    t.result()  # raises the connection error
            raise TimeoutError("web clients could not connect within 60 s")
    await on_connected()
    await wait_go()
    go.set()
    done, pending = await asyncio.wait(tasks, timeout=spec.timeout)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    merged: dict[str, Any] = {
        "finals": 0,
        "acks": 0,
        "drafts": 0,
        "notices": 0,
        "errors": 0,
        "problems": [],
        "latencies": [],
        "ack_latencies": [],
        "first_send": None,
        "last_final": None,
        "hung_chats": len(pending),
        "crashed_chats": 0,
    }
    firsts, lasts = [], []
    for t in done:
        exc = t.exception()
        if exc is not None:
            merged["crashed_chats"] += 1
            merged["problems"].append(f"client crashed: {exc!r}")
            continue
        chat = t.result()
        merged["finals"] += chat.finals
        merged["acks"] += chat.acks
        merged["drafts"] += chat.drafts
        merged["notices"] += chat.notices
        merged["errors"] += len(chat.errors)
        merged["problems"] += chat.problems
        merged["latencies"] += chat.latencies
        merged["ack_latencies"] += chat.ack_latencies
        if chat.first_send is not None:
            firsts.append(chat.first_send)
        if chat.last_final is not None:
            lasts.append(chat.last_final)
    merged["first_send"] = min(firsts, default=None)
    merged["last_final"] = max(lasts, default=None)
    if pending:
        merged["problems"].append(
            f"{len(pending)} chat(s) still waiting for finals after {spec.timeout:.0f} s"
        )
    merged["client_cpu_s"] = time.process_time() - cpu0
    return merged


def client_process(chat_ids: list[str], spec: ClientSpec, ready: Any, go: Any, results: Any) -> None:
    """Entry point of a client worker process; ``time.monotonic`` is system-wide, so
    the parent can merge first-send/last-final instants across processes."""

    async def on_connected() -> None:
        ready.put("ready")

    async def wait_go() -> None:
        await asyncio.to_thread(go.wait)

    try:
        merged = asyncio.run(run_clients(chat_ids, spec, on_connected, wait_go))
    except BaseException as exc:
        ready.put("failed")
        results.put({"fatal": repr(exc)})
        return
    results.put(merged)
