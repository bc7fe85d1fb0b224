"""The web chat's account roles: ``Accounts`` (users, sign-in tokens, sessions) and
``WebChats`` (who owns each chat, titles, the history the page loads).

Time is passed in, so the contract tests move it without sleeping.
"""

from __future__ import annotations

from typing import Protocol

from chatgate.domain.accounts import Account, SignedIn, SignInToken, WebSession
from chatgate.domain.web_chats import MAX_CONVERSATIONS_PER_USER, ChatSummary, HistoryItem


class Accounts(Protocol):
    """Users with a role; only hashes of their tokens, passwords and session cookies are kept."""

    async def create_account(self, account: Account, password_hash: str | None) -> bool:
        """Record a new user; False (nothing changed) when the name is taken."""
        ...

    async def account_by_name(self, name: str) -> tuple[Account, str | None] | None:
        """The user of that name, revoked or not, with their password hash (None: no password)."""
        ...

    async def list_accounts(self) -> list[Account]:
        """Every user, oldest first."""
        ...

    async def add_sign_in_token(self, token: SignInToken, token_hash: str) -> None:
        """Record a sign-in token of an existing user."""
        ...

    async def sign_in_token_by_hash(self, token_hash: str) -> tuple[SignInToken, Account] | None:
        """The token whose value hashes to ``token_hash`` and its user, revoked or not."""
        ...

    async def list_sign_in_tokens(self) -> list[SignInToken]:
        """Every sign-in token, oldest first (values are never kept)."""
        ...

    async def revoke_account(self, user_id: str, now: float) -> bool:
        """Revoke a user, their tokens and end their sessions, in one transaction; True when active."""
        ...

    async def revoke_sign_in_token(self, token_id: str, now: float) -> bool:
        """Revoke one token and end the sessions signed in with it; True when it was active."""
        ...

    async def create_web_session(self, session: WebSession, cookie_hash: str) -> None:
        """Record a signed-in browser."""
        ...

    async def signed_in(self, cookie_hash: str, now: float) -> SignedIn | None:
        """The session of that cookie if it is valid at ``now`` and its user is active, else None."""
        ...

    async def end_web_session(self, session_id: str, now: float) -> bool:
        """Sign a session out; True when it was valid."""
        ...

    async def live_sessions(self, session_ids: list[str], now: float) -> set[str]:
        """Which of ``session_ids`` are still valid at ``now`` with an active user."""
        ...


class WebChats(Protocol):
    """Chats owned by accounts, and what the page shows of them."""

    async def claim_chat(
        self, platform: str, chat_id: str, user_id: str, now: float, most: int = MAX_CONVERSATIONS_PER_USER
    ) -> str:
        """Record ``user_id`` as the chat's owner unless it has one; returns the owner, or
        ``NO_ROOM`` when the chat is new and ``user_id`` already owns ``most`` chats."""
        ...

    async def chat_owner(self, platform: str, chat_id: str) -> str | None:
        """The user id that owns the chat, None when nobody does yet."""
        ...

    async def set_chat_title(self, platform: str, chat_id: str, title: str, *, replace: bool) -> bool:
        """Title a chat (``replace=False``: only one that has none); True when it changed."""
        ...

    async def delete_chat(self, platform: str, chat_id: str) -> bool:
        """Give the chat to nobody (``DELETED_OWNER``) and drop its title; True when it was
        someone's. Its messages stay where delivery keeps them; no page can list or open it."""
        ...

    async def list_chats(
        self, platform: str, user_id: str, query: str | None, limit: int
    ) -> list[ChatSummary]:
        """The user's chats that have a message or a title, most recently active first;
        ``query`` matches titles and message text (case-insensitive substring)."""
        ...

    async def chat_history(
        self, platform: str, chat_id: str, before: float | None, limit: int
    ) -> list[HistoryItem]:
        """The chat's latest ``limit`` items before ``before`` (a time; None: the newest),
        oldest first: the user's messages, replies, notices and approval prompts."""
        ...
