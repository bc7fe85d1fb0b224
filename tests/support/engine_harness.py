"""Engine test harness: the real store, admission, scheduler, turn runner and delivery worker.

Wired like ``chatgate.app.gateway.Gateway`` minus HTTP. The doubles stand only at real seams:

- ``RecordingAdapter`` is the platform (the ``Adapter`` protocol): it records every delivery
  attempt and can be scripted to answer ``Deferred``/``RetryLater``/``Rejected`` or to raise.
- ``ProbeAgent`` is the agent (the ``Agent`` protocol): it answers like the real ``EchoAgent``
  (it streams through one) but records every request and can hold a turn on an ``asyncio.Event``
  or fail it, so tests can observe concurrency, cancellation and what the agent was sent.
- ``TranscriptFaults`` is a sqlite3 connection factory for ``SqliteStore(connect=...)`` whose
  authorizer denies ``INSERT INTO transcript`` for chosen sessions: a real SQLite error raised
  inside the store's real commit path.

Test modules get everything through fixtures (``make_harness``, ``wait_until``,
``transcript_faults``) so they never import this module by name (``conftest`` is ambiguous
across test folders).
"""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest
from msgspec.structs import replace

from chatgate.agents.base import AgentEvent, AgentRequest, Final
from chatgate.agents.echo import EchoAgent
from chatgate.domain.inbound import Inbound
from chatgate.domain.outbound import Capabilities, Delivered, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.source import Source
from chatgate.engine.admission import Admission
from chatgate.engine.authz import PlatformAccess
from chatgate.engine.delivery import DeliverySettings, DeliveryWorker
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.pipeline import EngineSettings, MediaSettings, build_engine
from chatgate.engine.ports import Admitted
from chatgate.engine.scheduler import Scheduler
from chatgate.engine.scheduling import SchedulerSettings
from chatgate.engine.turn import TurnRunner, TurnSettings
from chatgate.store.sqlite import Connect, SqliteStore

PLATFORM = "test"
TRANSPORT = "test-transport"

# Fast polling and short backoffs so retries happen within a test; correctness never depends
# on these values (every wait is on an observable condition).
FAST_SCHEDULER = SchedulerSettings(
    max_concurrent_turns=64,
    lease_seconds=30.0,
    poll_interval=0.05,
    retry_base=0.02,
    retry_max=0.2,
    suspect_delay=0.0,
)
FAST_DELIVERY = DeliverySettings(poll_interval=0.05, retry_base=0.01, retry_max=0.05, max_attempts=8)
FAST_TURNS = TurnSettings(draft_interval=0.0)


def make_inbound(
    text: str,
    *,
    chat_id: str = "c1",
    user_id: str | None = "u1",
    delivery_id: str | None = None,
    chat_type: str = "dm",
    platform: str = PLATFORM,
    kind: str = "text",
    payload: dict[str, Any] | None = None,
    transport: str = TRANSPORT,
    **source: Any,
) -> Inbound:
    """A test event with a fresh delivery id (unless given) and a message ref derived from it."""
    did = delivery_id or f"d-{uuid.uuid4().hex[:12]}"
    return Inbound(
        transport=transport,
        delivery_id=did,
        source=Source(platform=platform, chat_id=chat_id, chat_type=chat_type, user_id=user_id, **source),  # type: ignore[arg-type]
        text=text,
        kind=kind,  # type: ignore[arg-type]
        message_ref=f"ref-{did}",
        payload=payload or {},
    )


def read_db(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """One statement on a fresh connection to the database file (observation only)."""
    conn = sqlite3.connect(path, timeout=30.0)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


# ---------------------------------------------------------------- waiting


async def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, message: str | None = None) -> Any:
    """Poll ``predicate`` (sync or async) until it returns something truthy; return that."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message or predicate}")
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------- the platform double


Script = Callable[[OutboxRow], DeliveryResult | Awaitable[DeliveryResult | None] | None]


class RecordingAdapter:
    """The platform: records each ``deliver`` call.

    ``script(row)`` (sync or async) may return a ``DeliveryResult`` to answer instead of
    delivering, ``None`` to deliver, or raise.
    """

    platform = PLATFORM
    capabilities = Capabilities(drafts=True)

    def __init__(self) -> None:
        self.calls: list[OutboxRow] = []
        self.delivered: list[OutboxRow] = []
        self.drafts: list[tuple[str | None, str | None, str]] = []
        self.script: Script | None = None
        self.intake_stopped = False

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        self.calls.append(row)
        if self.script is not None:
            result = self.script(row)  # may raise: the worker must survive it
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                return result
        self.delivered.append(row)
        return Delivered(f"pm-{row.id}")

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        self.drafts.append((source.chat_id, in_reply_to, text))

    def stop_intake(self) -> None:
        self.intake_stopped = True

    def state(self) -> Any:
        from chatgate.engine.ports import AdapterState

        return AdapterState(connected=True)

    def rows(self, chat_id: str | None = None, kinds: Iterable[str] | None = None) -> list[OutboxRow]:
        wanted = set(kinds) if kinds is not None else None
        return [
            r
            for r in self.delivered
            if (chat_id is None or r.chat_id == chat_id) and (wanted is None or r.kind in wanted)
        ]

    def texts(self, chat_id: str | None = None, kinds: Iterable[str] = ("final",)) -> list[str]:
        return [r.text for r in self.rows(chat_id, kinds)]

    def calls_for(self, text: str) -> list[OutboxRow]:
        return [r for r in self.calls if r.text == text]


# ---------------------------------------------------------------- the agent double


TurnState = Literal["running", "done", "cancelled", "failed"]


@dataclass
class TurnRecord:
    request: AgentRequest
    state: TurnState = "running"
    left: bool = False

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(m.text for m in self.request.messages)


@dataclass
class _Hold:
    text: str
    gate: asyncio.Event
    remaining: int | None


class ProbeAgent:
    """Answers exactly like ``EchoAgent`` and records what happens to each turn."""

    name = "probe"

    def __init__(self) -> None:
        self._echo = EchoAgent(chunk_delay_ms=0, chunk_chars=4)
        self.turns: list[TurnRecord] = []
        self.active = 0
        self.max_active = 0
        self.active_by_session: Counter[str] = Counter()
        self.max_active_per_session = 0
        self._holds: list[_Hold] = []
        self._hold_all: asyncio.Event | None = None
        self.fail_texts: set[str] = set()

    # -- scripting
    def hold(self, text: str, times: int | None = 1) -> asyncio.Event:
        """Block turns whose last message is ``text`` (the first ``times`` ones) until set."""
        gate = asyncio.Event()
        self._holds.append(_Hold(text, gate, times))
        return gate

    def hold_every_turn(self) -> asyncio.Event:
        gate = asyncio.Event()
        self._hold_all = gate
        return gate

    def _gate_for(self, request: AgentRequest) -> asyncio.Event | None:
        if self._hold_all is not None and not self._hold_all.is_set():
            return self._hold_all
        last = request.messages[-1].text
        for hold in self._holds:
            if hold.text == last and hold.remaining != 0:
                if hold.remaining is not None:
                    hold.remaining -= 1
                return hold.gate
        return None

    # -- observation
    def turns_with(self, text: str) -> list[TurnRecord]:
        return [t for t in self.turns if text in t.texts]

    def running(self, text: str) -> bool:
        return any(t.state == "running" for t in self.turns_with(text))

    def requests(self, session_key: str | None = None) -> list[AgentRequest]:
        return [t.request for t in self.turns if session_key in (None, t.request.session_key)]

    # -- the Agent protocol
    async def stream(self, request: AgentRequest) -> AsyncIterator[AgentEvent]:
        record = TurnRecord(request)
        self.turns.append(record)
        self._enter(record)
        try:
            gate = self._gate_for(request)
            if gate is not None:
                await gate.wait()
            if self.fail_texts & set(record.texts):
                raise RuntimeError("probe agent failure")
            async for event in self._echo.stream(request):
                if isinstance(event, Final):
                    # The consumer stops iterating at the Final, so the turn ends here.
                    record.state = "done"
                    self._leave(record)
                yield event
        except asyncio.CancelledError:
            record.state = "cancelled"
            raise
        except Exception:
            record.state = "failed"
            raise
        finally:
            self._leave(record)

    def _enter(self, record: TurnRecord) -> None:
        key = record.request.session_key
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        self.active_by_session[key] += 1
        self.max_active_per_session = max(self.max_active_per_session, self.active_by_session[key])

    def _leave(self, record: TurnRecord) -> None:
        if record.left:
            return
        record.left = True
        self.active -= 1
        self.active_by_session[record.request.session_key] -= 1

    async def aclose(self) -> None:
        return None


# ---------------------------------------------------------------- the storage fault seam


class _FaultConnection(sqlite3.Connection):
    """A real sqlite3 connection that tells the authorizer which session a transcript insert is for."""

    faults: TranscriptFaults

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:  # type: ignore[override]
        rows = list(parameters)
        targeted = None
        if sql.lstrip().upper().startswith("INSERT INTO TRANSCRIPT"):
            keys = {r[1] for r in rows}  # (session_id, session_key, role, content, created_at)
            targeted = next(iter(sorted(keys & self.faults.failing_keys())), None)
        self.faults._local.target = targeted
        try:
            return super().executemany(sql, rows)
        finally:
            self.faults._local.target = None


class TranscriptFaults:
    """``connect`` for ``SqliteStore``: SQLite's authorizer denies transcript inserts on demand.

    ``fail(session_key, times)`` arms the fault for one session (``times=None``: until
    ``clear``); every denial is recorded in ``denied``. Statements are not cached, so the
    authorizer is consulted on every execution.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing: dict[str, int | None] = {}
        self._local = threading.local()
        self.denied: list[str] = []

    def fail(self, session_key: str, times: int | None = None) -> None:
        with self._lock:
            self._failing[session_key] = times

    def clear(self) -> None:
        with self._lock:
            self._failing.clear()

    def failing_keys(self) -> set[str]:
        with self._lock:
            return {k for k, left in self._failing.items() if left is None or left > 0}

    def denials(self, session_key: str) -> int:
        with self._lock:
            return sum(1 for k in self.denied if k == session_key)

    def _authorize(self, action: int, arg1: str | None, *_: object) -> int:
        target = getattr(self._local, "target", None)
        if action != sqlite3.SQLITE_INSERT or arg1 != "transcript" or target is None:
            return sqlite3.SQLITE_OK
        with self._lock:
            left = self._failing.get(target)
            if left is not None:
                if left <= 0:
                    return sqlite3.SQLITE_OK
                self._failing[target] = left - 1
            self.denied.append(target)
        return sqlite3.SQLITE_DENY

    def connect(self, path: str) -> sqlite3.Connection:
        conn = sqlite3.connect(
            path,
            isolation_level=None,
            check_same_thread=False,
            timeout=30.0,
            cached_statements=0,
            factory=_FaultConnection,
        )
        assert isinstance(conn, _FaultConnection)
        conn.faults = self
        conn.set_authorizer(self._authorize)
        return conn


# ---------------------------------------------------------------- the harness


@dataclass
class Harness:
    path: Path
    owner: str
    store: SqliteStore
    metrics: GatewayMetrics
    adapter: RecordingAdapter
    agent: Any
    admission: Admission
    runner: TurnRunner
    scheduler: Scheduler
    delivery: DeliveryWorker
    _started: bool = False
    _stopped: bool = False

    async def start(self) -> None:
        """What ``Gateway.start`` does minus HTTP: open, recover a predecessor's leases, run."""
        await self.store.open()
        await self.store.recover(self.owner)
        self.delivery.start()
        self.scheduler.start()
        self._started = True

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.scheduler.stop()
        await self.delivery.stop()
        await self.store.close()

    # -- input
    def inbound(self, text: str, **kw: Any) -> Inbound:
        return make_inbound(text, **kw)

    async def send(self, text: str, **kw: Any) -> Admitted:
        return await self.admission.admit(self.inbound(text, **kw))

    # -- observation
    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the database file directly (a separate connection; observation only)."""
        return read_db(self.path, sql, *params)

    def inbox(self, delivery_id: str) -> tuple[str, int, str | None]:
        """(status, attempts, outcome) of one admitted event."""
        rows = self.query(
            "SELECT status, attempts, outcome FROM inbox WHERE transport = ? AND delivery_id = ?",
            TRANSPORT,
            delivery_id,
        )
        assert len(rows) == 1, rows
        return rows[0]  # type: ignore[return-value]

    def outbox(self, text: str) -> list[tuple[str, int, str]]:
        """(status, attempts, kind) of the outbox rows with this text."""
        return self.query("SELECT status, attempts, kind FROM outbox WHERE text = ? ORDER BY id", text)

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    async def finals(self, chat_id: str, count: int, timeout: float = 10.0) -> list[str]:
        """Wait until ``count`` finals of ``chat_id`` were delivered; return their texts."""
        await wait_until(
            lambda: len(self.adapter.texts(chat_id)) >= count,
            timeout,
            f"{count} finals in {chat_id} (have {self.adapter.texts(chat_id)})",
        )
        # The platform has shown them; let the worker finish recording that (settle, metrics).
        await self.delivery.flush(5)
        return self.adapter.texts(chat_id)

    async def delivered(self, text: str, timeout: float = 10.0) -> OutboxRow:
        """Wait until a row with exactly this text was delivered; return it."""

        def found() -> OutboxRow | None:
            return next((r for r in self.adapter.delivered if r.text == text), None)

        row: OutboxRow = await wait_until(found, timeout, f"delivery of {text!r}")
        return row


MakeHarness = Callable[..., Awaitable[Harness]]


@pytest.fixture
def transcript_faults() -> TranscriptFaults:
    return TranscriptFaults()


@pytest.fixture
def wait() -> Callable[..., Awaitable[Any]]:
    """``await wait(predicate, timeout=10)``: poll until truthy, fail loudly on timeout."""
    return wait_until


@pytest.fixture
async def make_harness(tmp_path: Path) -> AsyncIterator[MakeHarness]:
    """Build (and by default start) a harness; every one built is stopped at teardown.

    ``scheduler``/``delivery``/``turns`` are overrides of the fast test settings.
    """
    built: list[Harness] = []

    async def make(
        *,
        agent: Literal["probe", "echo"] | Any = "probe",
        db: str = "chatgate.db",
        owner: str | None = None,
        rules: Mapping[str, PlatformAccess] | None = None,
        scheduler: Mapping[str, Any] | None = None,
        delivery: Mapping[str, Any] | None = None,
        turns: Mapping[str, Any] | None = None,
        connect: Connect | None = None,
        adapter: RecordingAdapter | None = None,
        start: bool = True,
        media: MediaSettings | None = None,
    ) -> Harness:
        path = tmp_path / db
        metrics = GatewayMetrics()
        store = SqliteStore(path, connect=connect) if connect is not None else SqliteStore(path)
        if agent == "probe":
            agent = ProbeAgent()
        elif agent == "echo":
            agent = EchoAgent(chunk_delay_ms=0)
        adapter = adapter or RecordingAdapter()
        name = owner or f"owner-{len(built)}"
        engine = build_engine(
            store,
            agent,
            EngineSettings(
                owner=name,
                access=rules if rules is not None else {PLATFORM: PlatformAccess(allow_all=True)},
                turns=replace(FAST_TURNS, **(turns or {})),
                scheduler=replace(FAST_SCHEDULER, **(scheduler or {})),
                delivery=replace(FAST_DELIVERY, **(delivery or {})),
                media=media,
            ),
            metrics,
            adapters={PLATFORM: adapter},
        )
        admission, runner, sched, delivery_worker = (
            engine.admission,
            engine.runner,
            engine.scheduler,
            engine.delivery,
        )
        harness = Harness(
            path, name, store, metrics, adapter, agent, admission, runner, sched, delivery_worker
        )
        built.append(harness)
        if start:
            await harness.start()
        else:
            await store.open()
        return harness

    yield make
    for harness in reversed(built):
        await harness.stop()
