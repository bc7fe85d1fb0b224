"""Whose each web chat is, and its title: recorded in every sign-in mode, so every mode has a
conversation list.

With accounts, the session's account claims a chat on its hello, and a hello for another
account's chat is refused and logged. Without (loopback, or a shared token), the browser's
own user id claims it; the chat id is then what keeps a conversation apart (as before), so a
hello for a chat another browser claimed is served, and the chat stays in its first owner's
list. A deleted chat is nobody's and is never served again.
"""

from __future__ import annotations

import contextlib
import logging
import time

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import WebChats
from chatgate.domain.web_chats import DELETED_OWNER, MAX_CONVERSATIONS_PER_USER, NO_ROOM, title_of
from chatgate.platforms.webchat.connection import Connection

log = logging.getLogger(__name__)


class ChatClaims:
    def __init__(self, store: WebChats, platform: str, most: int | None = None) -> None:
        self._store = store
        self._platform = platform
        self._most = MAX_CONVERSATIONS_PER_USER if most is None else most

    async def problem(self, chat_id: str, user_id: str, name: str, strict: bool) -> tuple[str, str] | None:
        """Claim the chat for ``user_id``; ``(code, message)`` when it may not be opened."""
        try:
            owner = await self._store.claim_chat(self._platform, chat_id, user_id, time.time(), self._most)
        except StoreUnavailable as exc:
            return "storage_unavailable", f"could not open this conversation: {exc}; reconnect to retry"
        if owner == DELETED_OWNER:
            return "not_found", "this conversation was deleted; start a new one"
        if owner == NO_ROOM:
            log.info(
                "web chat: %s has %d conversations, the most allowed; a new one was refused",
                name,
                self._most,
                extra={"code": "too_many_conversations", "user_id": user_id},
            )
            return (
                "too_many_conversations",
                f"you have {self._most} conversations, the most you may have;"
                " delete some from the list to start a new one",
            )
        if owner == user_id or not strict:
            return None
        log.warning(
            "web chat: %s tried to open chat %s of another user; refused",
            name,
            chat_id,
            extra={"code": "forbidden", "chat_id": chat_id, "user_id": user_id},
        )
        return "forbidden", "this conversation belongs to another user; start a new one"

    async def title(self, conn: Connection, text: str) -> None:
        """A chat's first message names it (best effort: a failure leaves it untitled)."""
        if conn.titled or conn.chat_id is None or text.lstrip().startswith("/"):
            return
        conn.titled = True
        with contextlib.suppress(StoreUnavailable):
            await self._store.set_chat_title(self._platform, conn.chat_id, title_of(text), replace=False)
