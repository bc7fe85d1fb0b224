"""Index hints for the queries whose cost must not grow with a store's history.

The outbox keeps every reply it ever sent and the inbox every message it ever admitted, so
a query that walks a chat's or a session's whole history, or a whole table, costs the one
writer more with each message, for as long as the gateway runs. A chat with 10,000 replies
made each reply's "is the chat's outbox free?" check 3.5 ms of the writer's CPU instead of
3 us, and the start-up's requeue and the delivery loop's claim scanned the whole outbox.

Without statistics SQLite's planner may prefer ``outbox_chat`` or ``inbox_session`` (every
row of the chat or session) over the partial index of open or queued rows, or a scan in
``id`` order over a sort. Each such query names its index with ``INDEXED BY``, so SQLite
refuses a statement it cannot run through that index instead of planning it another way,
and repeats the index's own ``status`` term so that the index applies
(``tests/store/test_sqlite_history_cost.py`` counts the steps against a long history).
"""

from __future__ import annotations

OPEN_ROWS = "INDEXED BY outbox_open"
"""Outbox rows that are pending, sending or ambiguous: ``status IN ('pending', 'sending',
'ambiguous')`` must be in the query's ``WHERE``."""

QUEUED_ROWS = "INDEXED BY inbox_queued"
"""Inbox items still queued: ``status = 'queued'`` must be in the query's ``WHERE``."""
