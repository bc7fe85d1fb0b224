"""The one function that derives a session key.

Byte-compatible with the Hermes relay contract's ``build_session_key`` for the
same source and flags, because relay connectors bind interaction capabilities
(``follow_up``, ``interrupt_inbound``) by that key. The contract's key carries no
scope (Slack workspace, Discord guild); isolation between scopes is kept by the
store, which binds a key to the scope of its first message, and by
``scoped_session_key``, the key a second scope gets for the same channel id.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from chatgate.domain.source import Source

DEFAULT_PROFILE = "main"


class IsolationPolicy(msgspec.Struct, frozen=True):
    """Who shares a session in a multi-party chat."""

    group_sessions_per_user: bool = True
    thread_sessions_per_user: bool = False


class PolicyOverride(msgspec.Struct, frozen=True):
    group_sessions_per_user: bool | None = None
    thread_sessions_per_user: bool | None = None


def resolve_policy(
    platform: str,
    default: IsolationPolicy,
    overrides: Mapping[str, PolicyOverride],
) -> IsolationPolicy:
    """Apply a per-platform override before derivation, never after."""
    override = overrides.get(platform)
    if override is None:
        return default
    return IsolationPolicy(
        group_sessions_per_user=(
            default.group_sessions_per_user
            if override.group_sessions_per_user is None
            else override.group_sessions_per_user
        ),
        thread_sessions_per_user=(
            default.thread_sessions_per_user
            if override.thread_sessions_per_user is None
            else override.thread_sessions_per_user
        ),
    )


def key_namespace(profile: str | None) -> str:
    """``agent:<profile>``; no profile (or ``default``) keys as ``agent:main``.

    A profile literally called ``main`` is marked ``main~`` so it never shares
    the default profile's sessions (``~`` is outside the profile-id alphabet).
    """
    if not profile or profile == "default":
        return f"agent:{DEFAULT_PROFILE}"
    if profile == DEFAULT_PROFILE:
        return f"agent:{DEFAULT_PROFILE}~"
    return f"agent:{profile}"


def session_key(
    source: Source,
    policy: IsolationPolicy = IsolationPolicy(),
    profile: str | None = None,
    *,
    scoped: bool = False,
) -> str:
    """Derive the session key once, at admission.

    ``agent:<profile>:<platform>:<chat_type>[:<chat_id>]...``. DMs are
    isolated per chat id and never get a user suffix unless they lack a chat
    id (then user, then thread). Groups add the participant when
    ``group_sessions_per_user`` and not in a shared thread. ``scoped`` puts the
    source's scope right after the chat type: the key of a scope whose contract key
    is already bound to another scope (never the contract's key, so used only then).
    """
    is_dm = source.chat_type == "dm"
    thread_id = source.thread_id or None
    chat_id = source.chat_id or None
    if is_dm:
        isolate_user = not chat_id
    else:
        shared_thread = bool(thread_id) and not policy.thread_sessions_per_user
        isolate_user = policy.group_sessions_per_user and not shared_thread
    participant = (source.user_id_alt or source.user_id or None) if isolate_user else None

    parts = [key_namespace(profile), source.platform, source.chat_type]
    if scoped and source.scope_id:
        parts.append(source.scope_id)
    if chat_id:
        parts.append(chat_id)
    user_part = [participant] if participant else []
    thread_part = [thread_id] if thread_id else []
    parts += (user_part + thread_part) if is_dm else (thread_part + user_part)
    return ":".join(parts)


def is_shared_session(source: Source, policy: IsolationPolicy) -> bool:
    """True when several people talk in one session (so no single user is pinned).

    Mirrors ``session_key``: shared exactly when a non-DM key carries no participant.
    """
    if source.chat_type == "dm":
        return False
    shared_thread = bool(source.thread_id) and not policy.thread_sessions_per_user
    return not (policy.group_sessions_per_user and not shared_thread)
