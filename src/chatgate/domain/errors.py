"""The store's failures, as every layer sees them.

They live in the domain because each layer handles them: the engine fences a session
on ``StoreUnavailable``, an adapter does not acknowledge, a backend raises them. A
caller can tell an outage (an exception) from absence (``None`` or an empty list).
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of store failures."""


class StoreUnavailable(StoreError):
    """The store could not be read or written; nothing was changed."""


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
