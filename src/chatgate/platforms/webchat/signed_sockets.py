"""The signed-in side of the web chat's sockets (``platforms.web.auth: accounts``).

The session cookie decides who a socket is, never the hello frame (whose chats are whose:
``chat_claims.py``). Sockets are kept per session so that a sign-out or a revocation closes them: at
once when it happened in this process, and within ``check_seconds`` when it happened
elsewhere (``chatgate user revoke``, another process of a fleet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Protocol

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import Accounts, WebChats
from chatgate.platforms.webchat.connection import SIGNED_OUT, Connection

log = logging.getLogger(__name__)
CHECK_BATCH = 500


class SignedStore(Accounts, WebChats, Protocol):
    """Sessions to re-check, and the chats their sockets open."""


class SignedSockets:
    def __init__(self, store: SignedStore, platform: str, check_seconds: float) -> None:
        self._store = store
        self._platform = platform
        self._check_seconds = check_seconds
        self._sessions: dict[str, set[Connection]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._check_loop(), name="chatgate-web-sessions")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def add(self, conn: Connection) -> None:
        assert conn.signed is not None
        self._sessions.setdefault(conn.signed.session.session_id, set()).add(conn)

    def discard(self, conn: Connection) -> None:
        if conn.signed is None:
            return
        peers = self._sessions.get(conn.signed.session.session_id)
        if peers is not None:
            peers.discard(conn)
            if not peers:
                del self._sessions[conn.signed.session.session_id]

    def end_sessions(self, session_ids: set[str] | None) -> None:
        """Close these sessions' sockets now; None: re-check every open socket now."""
        if session_ids is None:
            self._wake.set()
            return
        for session_id in session_ids:
            for conn in self._sessions.pop(session_id, set()):
                conn.close_with(SIGNED_OUT, "signed_out: this session ended; sign in again")

    async def _check_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._check_seconds)
            self._wake.clear()
            try:
                await self.check()
            except StoreUnavailable as exc:  # kept open: the next check decides
                log.warning("could not re-check web sessions: %s", exc, extra={"code": "storage_unavailable"})

    async def check(self) -> None:
        ids = list(self._sessions)
        ended: set[str] = set()
        for start in range(0, len(ids), CHECK_BATCH):
            batch = ids[start : start + CHECK_BATCH]
            live = await self._store.live_sessions(batch, time.time())
            ended.update(set(batch) - live)
        if ended:
            log.info("closing the web sockets of %d ended session(s)", len(ended))
            self.end_sessions(ended)
