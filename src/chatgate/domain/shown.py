"""A log argument safe to show to whoever may ask for the gateway's status.

``chatgate status`` and ``/status`` show the latest warning with its string arguments
blanked, because a string may be a chat or user id. An error id or an error's kind names
no one, and without them the line says nothing ("the agent failed: …"): wrapped in
``Shown``, they stay.
"""

from __future__ import annotations


class Shown(str):
    """A string log argument that names no one (an error id, a kind of failure)."""

    __slots__ = ()
