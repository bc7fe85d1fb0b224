"""The signed-in side of the web chat's sockets (``platforms.web.auth: accounts``).

The session cookie decides who a socket is, never the hello frame; a chat belongs to the
account that opened it first, and a hello for another account's chat is refused and
logged. Sockets are kept per session so that a sign-out or a revocation closes them: at
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
from chatgate.domain.web_chats import title_of
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

    async def owner_problem(self, conn: Connection, chat_id: str) -> tuple[str, str] | None:
        """Claim the chat for the socket's account; ``(code, message)`` when it is another's."""
        assert conn.signed is not None
        account = conn.signed.account
        try:
            owner = await self._store.claim_chat(self._platform, chat_id, account.user_id, time.time())
        except StoreUnavailable as exc:
            return "storage_unavailable", f"could not open this conversation: {exc}; reconnect to retry"
        if owner == account.user_id:
            return None
        log.warning(
            "web chat: %s tried to open chat %s of another user; refused",
            account.name,
            chat_id,
            extra={"code": "forbidden", "chat_id": chat_id, "user_id": account.user_id},
        )
        return "forbidden", "this conversation belongs to another user; start a new one"

    async def title(self, conn: Connection, text: str) -> None:
        """A chat's first message names it (best effort: a failure leaves it untitled)."""
        if conn.titled or conn.chat_id is None or text.lstrip().startswith("/"):
            return
        conn.titled = True
        with contextlib.suppress(StoreUnavailable):
            await self._store.set_chat_title(self._platform, conn.chat_id, title_of(text), replace=False)
