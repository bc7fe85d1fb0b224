"""A reply row is framed once per socket, even when it is both delivered live and in the backlog.

After a restart a resumed turn's notice is delivered while its chat's client is still loading
its hello backlog, which lists the same unconfirmed row: framed twice, the client confirmed it
twice and was told its second receipt was "not sent on this connection or is confirmed".
"""

from __future__ import annotations

from typing import Any

from chatgate.platforms.webchat.connection import Connection


def test_a_final_already_framed_and_unconfirmed_is_not_framed_again() -> None:
    conn = Connection(ws=None)  # type: ignore[arg-type]  # the queue is observed, nothing is written
    frame: dict[str, Any] = {"type": "notice", "message_id": "o7", "text": "restarted"}
    assert conn.send(frame) and conn.send(dict(frame))
    assert len(conn._queue) == 1
    conn.awaiting_receipt.discard("o7")  # the client confirmed it: a resend after that is framed
    assert conn.send(dict(frame)) and len(conn._queue) == 2
