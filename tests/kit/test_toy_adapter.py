"""A toy adapter built only from the kit gets the full pipeline's guarantees, over real sockets.

``toy_platform.py`` is a line protocol on 127.0.0.1 with no code beyond decode,
acknowledge-by-answer, encode, capabilities and lifecycle. Here it runs in the real
pipeline (``build_engine`` over a real ``SqliteStore`` in ``tmp_path``, the echo agent),
started and stopped in the gateway's order, and real TCP clients check what a user of the
platform would see: acks only after commit, a storage outage that is loud and loses
nothing, dedupe by id, refusals and unsupported lines recorded and acknowledged, one reply
per message in order per chat, and edited previews turned into the exact final.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from toy_platform import PLATFORM, TRANSPORT, EditableToyAdapter, ToyAdapter

from chatgate.agents.echo import EchoAgent
from chatgate.domain.outbound import PREVIEW_CURSOR
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.pipeline import Engine, EngineSettings, build_engine
from chatgate.store.sqlite import Connect, SqliteStore
from support.engine_harness import FAST_DELIVERY, FAST_SCHEDULER, FAST_TURNS, read_db, wait_until
from support.web_harness import InboxInsertSwitch

TOY_FILE = Path(__file__).with_name("toy_platform.py")
ARCHITECTURE = Path(__file__).parents[2] / "docs" / "architecture.md"
ALLOWED = frozenset({"alice", "bob", "carol"})


# ---------------------------------------------------------------- a client of the toy platform


class ToyClient:
    """One TCP client: every line it receives, in order; for each ack, what the SQLite file held
    at the moment the ack was read (a fresh connection to the file, before anything else runs)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, db: Path) -> None:
        self._reader, self._writer, self._db = reader, writer, db
        self.lines: list[dict[str, Any]] = []
        self.inbox_at_ack: dict[str, int] = {}
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while line := await self._reader.readline():
            message = json.loads(line)
            if message["type"] == "ack" and message.get("id") and "refused" not in message:
                rows = read_db(
                    self._db,
                    "SELECT count(*) FROM inbox WHERE transport = ? AND delivery_id = ?",
                    TRANSPORT,
                    message["id"],
                )
                self.inbox_at_ack.setdefault(message["id"], rows[0][0])
            self.lines.append(message)

    async def send(self, line_id: str, chat: str, text: str, user: str = "alice", **extra: Any) -> None:
        await self.send_raw(json.dumps({"id": line_id, "chat": chat, "user": user, "text": text, **extra}))

    async def send_raw(self, raw: str) -> None:
        self._writer.write(raw.encode() + b"\n")
        await self._writer.drain()

    async def until(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any]:
        """Wait for the first received line that matches."""

        def found() -> dict[str, Any] | None:
            return next((m for m in self.lines if predicate(m)), None)

        line: dict[str, Any] = await wait_until(found, timeout, f"a line matching {predicate}")
        return line

    async def answer(self, line_id: str | None) -> dict[str, Any]:
        """The ack or error line for ``line_id`` (the first one not taken yet)."""
        return await self.until(lambda m: m["type"] in ("ack", "error") and m.get("id") == line_id)

    async def reply(self, in_reply_to: str) -> dict[str, Any]:
        return await self.until(lambda m: m["type"] == "reply" and m["in_reply_to"] == in_reply_to)

    def of(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        return [m for m in self.lines if m["type"] == kind and all(m.get(k) == v for k, v in match.items())]

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await self._task


# ---------------------------------------------------------------- the toy in the real pipeline


@dataclass
class ToyWorld:
    path: Path
    store: SqliteStore
    engine: Engine
    adapter: ToyAdapter
    clients: list[ToyClient] = field(default_factory=list)
    stopped: bool = False

    async def client(self) -> ToyClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.adapter.port)
        client = ToyClient(reader, writer, self.path)
        self.clients.append(client)
        return client

    def inbox(self, line_id: str) -> list[tuple[Any, ...]]:
        return read_db(
            self.path,
            "SELECT status, outcome FROM inbox WHERE transport = ? AND delivery_id = ?",
            TRANSPORT,
            line_id,
        )

    async def stop(self) -> None:
        """The gateway's shutdown order: stop intake, drain turns, flush the outbox, close."""
        if self.stopped:
            return
        self.stopped = True
        for client in self.clients:
            await client.close()
        self.adapter.stop_intake()
        await self.engine.drain(5.0)
        await self.engine.stop(5.0, 5.0)
        await self.adapter.aclose(5.0)
        await self.store.close()


MakeWorld = Callable[..., Awaitable[ToyWorld]]


@pytest.fixture
async def make_world(tmp_path: Path) -> AsyncIterator[MakeWorld]:
    worlds: list[ToyWorld] = []

    async def make(
        *, adapter: type[ToyAdapter] = ToyAdapter, connect: Connect | None = None, chunk_delay_ms: float = 0
    ) -> ToyWorld:
        path = tmp_path / "chatgate.db"
        store = SqliteStore(path, connect=connect) if connect is not None else SqliteStore(path)
        settings = EngineSettings(
            owner=f"toy-{len(worlds)}",
            access={PLATFORM: PlatformAccess(allow_users=ALLOWED)},
            turns=FAST_TURNS,
            scheduler=FAST_SCHEDULER,
            delivery=FAST_DELIVERY,
        )
        engine = build_engine(store, EchoAgent(chunk_delay_ms=chunk_delay_ms), settings)
        toy = adapter(engine.intake)  # the adapter sees the engine only through the Intake port
        engine.add_adapter(toy)
        assert not toy.state().connected
        # The gateway's start order: the store is open and the engine runs before intake begins.
        await engine.open()
        engine.start()
        await toy.start()
        world = ToyWorld(path, store, engine, toy)
        worlds.append(world)
        return world

    yield make
    for world in reversed(worlds):
        await world.stop()


# ---------------------------------------------------------------- the pipeline's guarantees


async def test_each_line_is_acked_only_once_its_inbox_row_is_committed(make_world: MakeWorld) -> None:
    world = await make_world()
    assert world.adapter.state().connected
    client = await world.client()
    ids = [f"{chat}-{n}" for n in range(4) for chat in ("c1", "c2", "c3")]
    for line_id in ids:  # pipelined: nobody waits for an ack before sending the next line
        await client.send(line_id, line_id.split("-")[0], f"hello {line_id}")
    for line_id in ids:
        assert await client.answer(line_id) == {"type": "ack", "id": line_id, "duplicate": False}
    assert client.inbox_at_ack == dict.fromkeys(ids, 1), "an ack was read before its row was in the file"
    for line_id in ids:
        assert (await client.reply(line_id))["text"] == f"echo: hello {line_id}"


async def test_a_storage_outage_gives_an_error_line_not_an_ack_and_the_resend_is_admitted_once(
    make_world: MakeWorld,
) -> None:
    switch = InboxInsertSwitch()  # SQLite's authorizer refuses INSERT INTO inbox while blocked
    world = await make_world(connect=switch.connect)
    client = await world.client()

    switch.block()
    await client.send("lost?", "c1", "sent during the outage")
    error = await client.answer("lost?")
    assert error["type"] == "error" and error["code"] == "storage_unavailable", error
    assert "not saved" in error["message"]
    assert switch.denied >= 2, "the intake did not retry within the lane's patience"
    assert world.inbox("lost?") == [] and client.of("ack") == []
    assert [r for r in await world.store.rejected() if r.delivery_id == "lost?"] == [], (
        "an outage is not a rejection: the line must be resent, not written off"
    )

    switch.unblock()
    await client.send("lost?", "c1", "sent during the outage")  # the client resends what was not saved
    ack = await client.until(lambda m: m["type"] == "ack" and m["id"] == "lost?")
    assert ack == {"type": "ack", "id": "lost?", "duplicate": False}
    assert client.inbox_at_ack["lost?"] == 1
    await client.send("after", "c1", "after the outage")
    assert (await client.reply("after"))["text"] == "echo: after the outage"
    assert [r["text"] for r in client.of("reply", chat="c1")] == [
        "echo: sent during the outage",
        "echo: after the outage",
    ]
    assert world.inbox("lost?") == [("done", "ok")]


async def test_the_same_id_twice_is_acked_twice_and_answered_once(make_world: MakeWorld) -> None:
    world = await make_world()
    client = await world.client()
    await client.send("d1", "c1", "once")
    await client.send("d1", "c1", "once")  # a resend whose first copy was saved
    await client.send("d1", "c1", "the same id with other text")  # dedupe is by id, not content
    await client.send("d2", "c1", "once")  # the same text with a new id is a new message
    await wait_until(lambda: len(client.of("ack")) == 4)
    acks = client.of("ack")
    assert [(a["id"], a["duplicate"]) for a in acks] == [
        ("d1", False),
        ("d1", True),
        ("d1", True),
        ("d2", False),
    ]
    await client.reply("d2")
    assert [(r["in_reply_to"], r["text"]) for r in client.of("reply")] == [
        ("d1", "echo: once"),
        ("d2", "echo: once"),
    ]
    assert world.inbox("d1") == [("done", "ok")]


async def test_a_user_not_allowed_is_refused_with_the_reason_and_recorded_in_the_rejected_log(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    mallory = await world.client()
    await mallory.send("m1", "c1", "let me in", user="mallory")
    answer = await mallory.answer("m1")
    assert answer["type"] == "ack", "a refusal is acknowledged: resending it cannot change the answer"
    assert answer["refused"] == "unauthorized"
    assert "mallory" in answer["reason"] and "allowlist" in answer["reason"]
    rejected = [r for r in await world.store.rejected() if r.delivery_id == "m1"]
    assert len(rejected) == 1 and rejected[0].transport == TRANSPORT
    assert rejected[0].reason.startswith("unauthorized: ") and "mallory" in rejected[0].reason
    assert "let me in" in rejected[0].excerpt

    alice = await world.client()
    await alice.send("a1", "c1", "hello")  # the same chat: anything queued for m1 would come first
    assert (await alice.reply("a1"))["text"] == "echo: hello"
    assert world.inbox("m1") == []
    assert [r["in_reply_to"] for r in alice.of("reply")] == ["a1"]
    assert mallory.of("reply") == [], "a refused sender joins no chat"


async def test_an_unsupported_line_is_recorded_with_its_reason_and_acked_never_a_message(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    client = await world.client()
    await client.send("s1", "c1", "", type="sticker", sticker="cat.webp")
    await client.send_raw("this is not json")
    await client.send_raw('{"chat": "c1", "user": "alice", "text": "no id"}')
    sticker = await client.answer("s1")
    assert sticker == {
        "type": "ack",
        "id": "s1",
        "refused": "unsupported",
        "reason": "unsupported line type 'sticker'",
    }
    await wait_until(lambda: len([m for m in client.lines if m.get("id") is None]) == 2)
    nameless = [m for m in client.lines if m.get("id") is None]
    assert [m["refused"] for m in nameless] == ["unsupported", "unsupported"]
    assert nameless[0]["reason"].startswith("not a JSON line")
    assert nameless[1]["reason"] == "a line needs a string id"

    rejected = {r.reason: r for r in await world.store.rejected()}
    assert rejected["unsupported line type 'sticker'"].delivery_id == "s1"
    assert "cat.webp" in rejected["unsupported line type 'sticker'"].excerpt
    assert rejected["a line needs a string id"].excerpt.startswith('{"chat": "c1"')
    assert any(reason.startswith("not a JSON line") for reason in rejected)
    assert all(r.transport == TRANSPORT for r in rejected.values())

    await client.send("t1", "c1", "a real message")
    assert (await client.reply("t1"))["text"] == "echo: a real message"
    assert [r["in_reply_to"] for r in client.of("reply")] == ["t1"], "an unsupported line was answered"
    assert read_db(world.path, "SELECT delivery_id FROM inbox") == [("t1",)]


async def test_one_reply_per_message_in_order_per_chat(make_world: MakeWorld) -> None:
    world = await make_world()
    chats = [f"chat{n}" for n in range(5)]
    first, second = await world.client(), await world.client()
    sent: dict[str, list[str]] = {chat: [] for chat in chats}
    for n in range(6):  # interleaved on two connections: the per-chat queues keep each chat's order
        for i, chat in enumerate(chats):
            line_id = f"{chat}:{n}"
            await (first if i % 2 == 0 else second).send(line_id, chat, f"{chat} message {n}", user="bob")
            sent[chat].append(line_id)
    for i, chat in enumerate(chats):
        client = first if i % 2 == 0 else second
        await client.reply(sent[chat][-1])
        replies = client.of("reply", chat=chat)
        assert [r["in_reply_to"] for r in replies] == sent[chat]
        assert [r["text"] for r in replies] == [f"echo: {chat} message {n}" for n in range(6)]
        assert len({r["message_id"] for r in replies}) == 6
        assert all(r["kind"] == "final" for r in replies)
    assert read_db(world.path, "SELECT count(*), count(DISTINCT session_key) FROM inbox") == [(30, 5)]


async def test_an_editable_toy_gets_edited_previews_and_its_final_through_deliver_final(
    make_world: MakeWorld,
) -> None:
    world = await make_world(adapter=EditableToyAdapter, chunk_delay_ms=5)
    client = await world.client()
    text = "a reply long enough to be streamed in several chunks"
    await client.send("e1", "c1", text)
    final = f"echo: {text}"
    await client.until(lambda m: m["type"] == "edit" and m["text"] == final)
    await client.send("e2", "c1", "next")  # the same chat: anything after e1's final arrives first
    await client.until(lambda m: m["type"] == "edit" and m["text"] == "echo: next")
    of_e1 = [
        m for m in client.lines if m["type"] in ("send", "edit", "delete") and m.get("message_id") == "t1"
    ]
    assert of_e1[0]["type"] == "send" and of_e1[0]["in_reply_to"] == "e1"
    assert of_e1[0]["text"].endswith(PREVIEW_CURSOR), "the preview must never look like the final"
    assert [m["type"] for m in of_e1[1:]] == ["edit"] * (len(of_e1) - 1)
    assert of_e1[-1]["text"] == final, "the preview was not edited into the exact final"
    assert all(m["text"].endswith(PREVIEW_CURSOR) for m in of_e1[:-1])
    assert [m for m in client.lines if m["type"] == "send" and m["in_reply_to"] == "e1"] == of_e1[:1], (
        "the final was sent as a second message instead of editing the preview"
    )
    assert client.of("reply") == [] and client.of("delete") == []
    assert read_db(world.path, "SELECT platform_message_id, status FROM outbox ORDER BY id")[0] == (
        "t1",
        "sent",
    )


async def test_stop_intake_answers_new_lines_with_an_error_and_aclose_ends_the_adapter(
    make_world: MakeWorld,
) -> None:
    world = await make_world()
    client = await world.client()
    await client.send("before", "c1", "before the stop")
    await client.reply("before")
    world.adapter.stop_intake()
    await client.send("late", "c1", "after the stop")
    assert await client.answer("late") == {"type": "error", "id": "late", "code": "shutting_down"}
    assert world.inbox("late") == []
    await world.stop()
    assert not world.adapter.state().connected
    await world.adapter.aclose(1.0)  # idempotent


# ---------------------------------------------------------------- the kit's rules and the walkthrough


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_toy_adapter_imports_only_the_kit() -> None:
    """The rule ``lint-imports`` enforces for ``chatgate.platforms``, applied to the toy."""
    ours = {name for name in _imports(TOY_FILE) if name.split(".")[0] == "chatgate"}
    allowed = ("chatgate.domain", "chatgate.engine.ports", "chatgate.platforms.kit")
    assert "chatgate.engine.ports" in ours
    outside = {name for name in ours if not any(name == a or name.startswith(a + ".") for a in allowed)}
    assert outside == set(), f"the toy reaches past the kit: {sorted(outside)}"


def _walkthrough() -> str:
    doc = ARCHITECTURE.read_text()
    start = doc.index("\n## Writing an adapter\n")
    end = doc.index("\n## ", start + 1)
    return doc[start:end]


def test_the_walkthrough_quotes_the_toy_verbatim_and_names_real_symbols() -> None:
    """Every code block of "Writing an adapter" whose first line names a file under tests/ is a
    slice of that file (``...`` lines elide, the order is kept), and every ``chatgate.`` name and
    every ``.py`` path the section mentions exists."""
    section = _walkthrough()
    root = ARCHITECTURE.parents[1]
    quoted = re.findall(r"```python\n# (tests/\S+\.py)\n(.*?)```", section, re.S)
    assert {path for path, _ in quoted} == {
        "tests/kit/toy_platform.py",
        "tests/kit/test_toy_adapter.py",
        "tests/kit/toy_plugin.py",
        "tests/kit/test_toy_plugin.py",
    }
    assert len(quoted) >= 6, "the walkthrough shows the toy's decode, ack, queues, encode and lifecycle"
    for path, block in quoted:
        source = (root / path).read_text().splitlines()
        at = 0
        for line in block.splitlines():
            if not line.strip() or line.strip() == "...":
                continue
            assert line in source[at:], f"not in {path} (in this order): {line!r}"
            at = source.index(line, at) + 1

    for dotted in sorted(set(re.findall(r"`(chatgate(?:\.\w+)+)", section))):
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj: Any = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                assert hasattr(obj, attr), f"{dotted}: {attr} does not exist"
                obj = getattr(obj, attr)
            break
        else:
            raise AssertionError(f"{dotted} does not exist")
    for path in sorted(set(re.findall(r"`([\w/]+\.py)`", section))):
        # The page's rule: paths are relative to src/chatgate/ unless they start with tests/.
        assert (root / path if path.startswith("tests/") else root / "src" / "chatgate" / path).exists(), path
