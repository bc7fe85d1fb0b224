"""A gateway in a fleet: the notices other processes send through the shared store.

A PostgreSQL store relays ``LISTEN/NOTIFY`` notices (``PostgresStore.add_listener``): a
message queued or a reply recorded by any process wakes this one's scheduler or delivery
now instead of at its next poll; a ``/stop`` or ``/new`` admitted by another process
cancels the turn running here; an approval answered through another process wakes the
turn waiting here. A store without notices (SQLite: one process) needs none of this.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Protocol, runtime_checkable

from chatgate.domain.errors import CredentialInUse, StoreUnavailable
from chatgate.domain.store_roles import ApprovalReads
from chatgate.domain.tasks import cancel_and_wait
from chatgate.engine.pipeline import Engine
from chatgate.engine.ports import Adapter

log = logging.getLogger(__name__)


@runtime_checkable
class FleetNoticeSource(Protocol):
    def add_listener(self, fn: Callable[[str], None]) -> None: ...


class FleetNotices:
    """Acts on the fleet's notices; owns the short tasks they start (cancelled at ``close``)."""

    def __init__(self, engine: Engine, approvals: ApprovalReads) -> None:
        self._engine = engine
        self._approvals = approvals
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def attach(self, store: object) -> bool:
        """Listen to ``store``'s notices if it has any; True when it does."""
        if not isinstance(store, FleetNoticeSource):
            return False
        store.add_listener(self.on_notice)
        return True

    def on_notice(self, notice: str) -> None:
        if self._closed:
            return
        kind, _, arg = notice.partition(":")
        if kind == "inbox":
            self._engine.scheduler.wake()
        elif kind == "outbox":
            self._engine.delivery.wake()
        elif kind == "stop" and arg:
            self._spawn(self._engine.stop_session(arg))
        elif kind == "approval" and arg and self._engine.approvals.is_waiting(arg):
            self._spawn(self._wake_approval(arg))

    async def _wake_approval(self, prompt_id: str) -> None:
        try:
            record = await self._approvals.get_approval(prompt_id)
        except StoreUnavailable as exc:
            log.warning("could not read approval %s answered elsewhere: %s", prompt_id, exc)
            return
        if record is not None and record.state != "pending":
            self._engine.approvals.wake(record)

    def _spawn(self, work: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(list(self._tasks))


@runtime_checkable
class FleetCredentialStore(Protocol):
    async def hold_credential(self, key: str) -> bool: ...

    async def credential_held(self, key: str) -> bool: ...

    def add_credential_listener(self, fn: Callable[[str], None]) -> None: ...

    async def announce_adapters(self, adapters: dict[str, str]) -> None: ...


PollGuard = Callable[[], Awaitable[bool]]


@runtime_checkable
class StandbyAdapter(Protocol):
    """An adapter that can send without receiving (a polling bot whose polling another process does)."""

    platform: str

    async def start(self) -> None: ...

    async def start_sending(self) -> None: ...

    def stop_polling(self) -> None: ...

    def set_poll_guard(self, guard: PollGuard) -> None: ...


def credential_key(kind: str, value: str) -> str:
    """What the database sees of a credential: a digest, never the token."""
    return hashlib.sha256(f"{kind}\0{value}".encode()).hexdigest()


class FleetCredentials:
    """One process of the fleet per credential, across hosts: a PostgreSQL advisory lock each.

    A polling bot's adapter in a process that did not get its lock stands by: it sends
    (replies of turns run here) but does not poll; every ``retry_seconds`` it tries the
    lock again, and takes polling over once the holder is gone (the server dropped the
    dead holder's connection, and its lock with it). A poller asks before every poll
    whether its lock still holds, and is stopped the moment the store says it was lost
    (its connection was cut): it stands by again, and a standby anywhere, itself included,
    may take the lock. A taker waits ``handover_seconds`` before its first poll, so a cut-off
    holder has abandoned its last poll. A credential whose adapter cannot stand by (the
    relay) held by another process refuses the start, as the file lock does for one host.
    """

    def __init__(self, store: object, retry_seconds: float = 1.0, handover_seconds: float = 0.5) -> None:
        self._store = store if isinstance(store, FleetCredentialStore) else None
        self._retry = retry_seconds
        self._handover = handover_seconds
        self._standby: dict[str, tuple[str, StandbyAdapter]] = {}
        self._polling: dict[str, tuple[str, StandbyAdapter]] = {}
        self._adapters: Mapping[str, Adapter] = {}
        self._task: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        if self._store is not None:
            self._store.add_credential_listener(self._lost)

    @property
    def enabled(self) -> bool:
        """True for a fleet store: its locks replace the per-host credential files."""
        return self._store is not None

    async def take(self, credentials: list[tuple[str, str, str]], adapters: dict[str, object]) -> set[str]:
        """Lock each (kind, value, what); the platforms that stand by. Raises ``CredentialHeld``."""
        if self._store is None:
            return set()
        for kind, value, what in credentials:
            key = credential_key(kind, value)
            adapter = adapters.get(kind)
            if isinstance(adapter, StandbyAdapter):
                adapter.set_poll_guard(functools.partial(self._may_poll, kind))
            if await self._store.hold_credential(key):
                if isinstance(adapter, StandbyAdapter):
                    self._polling[kind] = (key, adapter)
                continue
            if not isinstance(adapter, StandbyAdapter):
                raise CredentialHeld(
                    f"{kind}: this {what} is in use by another process of the fleet; one process per"
                    f" {what}: disable platforms.{kind} in all but one of them"
                )
            self._standby[kind] = (key, adapter)
            log.info("%s: another process of the fleet polls; this one stands by and sends", kind)
        return set(self._standby)

    async def announce(self, adapters: Mapping[str, Adapter]) -> None:
        """Tell the fleet what this process serves (``chatgate status`` lists it); best effort."""
        self._adapters = adapters
        if self._store is None:
            return
        states = {
            name: "standby" if name in self._standby else ("connected" if a.state().connected else "starting")
            for name, a in adapters.items()
        }
        try:
            await self._store.announce_adapters(states)
        except StoreUnavailable as exc:
            log.info("could not tell the fleet this process's adapters: %s", exc)

    def start(self) -> None:
        self._started = True
        if self._standby and (self._task is None or self._task.done()) and not self._closed:
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="chatgate-credentials")

    async def _may_poll(self, kind: str) -> bool:
        """The poll guard: True while this process holds ``kind``'s lock (a round trip says so)."""
        held = self._polling.get(kind)
        if held is None or self._store is None or self._closed:
            return False
        try:
            if await self._store.credential_held(held[0]):
                return True
        except StoreUnavailable as exc:
            log.warning("%s: could not check the polling lock: %s", kind, exc)
        self._stand_by(kind)
        return False

    def _lost(self, key: str) -> None:
        """The store lost ``key``'s lock (its connection was cut): stop that poller now."""
        for kind, (held, _) in list(self._polling.items()):
            if held == key:
                self._stand_by(kind)

    def _stand_by(self, kind: str) -> None:
        entry = self._polling.pop(kind, None)
        if entry is None or self._closed:
            return
        entry[1].stop_polling()
        self._standby[kind] = entry
        log.warning("%s: this process lost the polling lock; it stopped polling and stands by", kind)
        if self._started:
            self.start()

    async def _watch(self) -> None:
        if self._adapters:  # a poller stood by: the fleet listing says so
            await self.announce(self._adapters)
        while self._standby:
            await asyncio.sleep(self._retry)
            for kind, (key, adapter) in list(self._standby.items()):
                assert self._store is not None
                try:
                    taken = await self._store.hold_credential(key)
                except StoreUnavailable:
                    continue
                if not taken:
                    continue
                del self._standby[kind]
                self._polling[kind] = (key, adapter)
                await asyncio.sleep(self._handover)  # a cut-off holder abandons its last poll meanwhile
                if kind not in self._polling:
                    continue  # lost again during the handover
                log.warning("%s: the process that polled is gone; this one polls now", kind)
                await adapter.start()
                await self.announce(self._adapters)

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None


class CredentialHeld(CredentialInUse):
    """Another live process of the fleet holds a credential this one cannot stand by for."""
