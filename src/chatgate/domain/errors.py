"""The one family of chatgate's exceptions: a root, and a branch per kind of failure.

Every exception the gateway raises on purpose derives from ``ChatgateError``, under the
branch that says who must act: ``ConfigError`` (the operator fixes the config),
``StartupError`` (the gateway cannot start; the message says what to do), ``StoreError``
(the durable state), ``PlatformCallError`` (a platform's API; whether the call happened is
the subclass), ``AgentError`` (the model or its tools). They live in the domain because
every layer raises or handles them. No name means two things.
"""

from __future__ import annotations


class ChatgateError(Exception):
    """The root of every exception chatgate raises on purpose."""


# ---------------------------------------------------------------- configuration and start


class ConfigError(ChatgateError):
    """A configuration mistake, already phrased for the user: the key, the problem, the fix."""


class StartupError(ChatgateError):
    """The gateway cannot start; the message says what to do."""


class CredentialInUse(StartupError):
    """Another process holds a platform credential this gateway would use (one process per credential)."""


class AddressInUse(StartupError):
    """The HTTP address cannot be listened on (taken, or not ours to take): the config must change."""


# ---------------------------------------------------------------- the store


class StoreError(ChatgateError):
    """Base of store failures.

    A caller can tell an outage (an exception) from absence (``None`` or an empty list)."""


class StoreUnavailable(StoreError):
    """The store could not be read or written; nothing was changed."""


class NoDatabaseYet(StoreUnavailable):
    """A command found no state to read: no gateway has stored anything there yet."""

    def __init__(self, where: object) -> None:
        super().__init__(f"there is no database at {where} yet")
        self.path = where


class LeaseLost(StoreError):
    """This process no longer owns the session (it expired or was stopped)."""


class ScopeConflict(StoreError):
    """The session key is bound to another scope (a Slack workspace, a Discord guild).

    The contract's key leaves the scope out, so two workspaces may derive one key for a
    channel id each of them uses; the store refuses to let them share the session and
    admission keys the newcomer with its scope. Nothing was changed.
    """

    def __init__(self, session_key: str) -> None:
        super().__init__(f"session {session_key} belongs to another scope")
        self.session_key = session_key


# ---------------------------------------------------------------- platforms and agents


class PlatformCallError(ChatgateError):
    """A call to a platform's API failed; the subclass says whether it may have happened."""


class NotSent(PlatformCallError):
    """The call certainly did not take effect (refused before it ran, or never left): safe to retry."""


class MaybeSent(PlatformCallError):
    """The call may have taken effect (the answer was lost): a retry may repeat it."""


class AgentError(ChatgateError):
    """The agent (its model endpoint or a tool) failed a turn."""
