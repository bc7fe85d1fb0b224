"""``platforms.web``: the keys of the built-in web chat's section (docs/webchat.md)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from chatgate.domain.web_chats import MAX_CONVERSATIONS_PER_USER
from chatgate.platforms.kit.section import EnvName, PlatformSection


class WebChatSection(PlatformSection, kw_only=True):
    enabled: bool = True
    allow_all: bool | None = None
    """``None``: allow everyone when bound to loopback, nobody otherwise."""
    allow_users: list[str] = []
    pairing: bool = False
    """Strangers who write in a DM get a one-time code for the operator (``chatgate pairing``)."""
    access_token_env: EnvName | None = None
    auth: Literal["none", "token", "accounts"] | None = None
    """``accounts``: people sign in (``chatgate user add``) and see only their own chats;
    ``token``: one shared access token (``access_token_env``); ``none``: loopback only.
    Unset: ``token`` when ``access_token_env`` is set, else ``none``."""
    session_hours: Annotated[float, msgspec.Meta(gt=0, le=24 * 366)] = 168.0
    """How long a sign-in lasts in a browser (accounts)."""
    secure_cookies: bool | None = None
    """Mark the session cookie ``Secure``; unset: when the page was requested over https
    (or a proxy in ``http.trusted_proxies`` said so with ``X-Forwarded-Proto: https``)."""
    sign_in_attempts_per_minute: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 10
    """Sign-in attempts per minute, per client address and per account named (accounts)."""
    session_check_seconds: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 5.0
    """How often open sockets re-check their session, so a revocation elsewhere (the CLI,
    another process of a fleet) closes them (accounts)."""
    agent_name: Annotated[str, msgspec.Meta(max_length=80)] = ""
    """The name the page gives the agent (its welcome: "Hello, I am NAME"; "NAME is writing");
    empty: the page names nobody."""
    max_text_chars: Annotated[int, msgspec.Meta(ge=1)] = 16_000
    max_conversations_per_user: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = MAX_CONVERSATIONS_PER_USER
    """Conversations one user (an account, or a browser without sign-in) may have; deleting
    one frees its place. A bound on what one user can make every list and search go through."""
    draft_interval_ms: Annotated[float, msgspec.Meta(ge=0)] = 50.0
    """Milliseconds between two drafts of a reply being written (each a frame to the browser)."""
    allowed_origins: list[str] = []
    """Other origins (``https://chat.example``) whose pages may open /ws; same-origin always may."""
    max_queued_bytes: Annotated[int, msgspec.Meta(ge=64 * 1024)] = 4 * 1024 * 1024
    """What one socket may have waiting to be written before a client that does not read is
    closed (and resyncs on reconnect); at least one reply's frame (``max_text_chars``)."""

    def auth_mode(self) -> Literal["none", "token", "accounts"]:
        if self.auth is not None:
            return self.auth
        return "token" if self.access_token_env else "none"

    def origins(self) -> frozenset[str]:
        """``allowed_origins`` as browsers send an ``Origin`` (no trailing slash)."""
        return frozenset(o.rstrip("/") for o in self.allowed_origins)
