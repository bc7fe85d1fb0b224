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
