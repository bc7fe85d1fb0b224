"""How an API exchange is read back, once for both backends: the admitted request's inbox row,
and its answer: the turn's final (its parts ``final:<seq>``, ``final:<seq>:<i>`` joined in
order), else a control command's reply (``cmd:<transport>:<delivery id>``), and the files the
turn attached (``file:<seq>:<n>``). Nothing of its own is stored."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod

from chatgate.domain.api_keys import ApiExchange
from chatgate.domain.outfiles import OutFile
from chatgate.domain.usage import USAGE_KEY, Usage
from chatgate.store.rows import Row

INBOX_ROW = "seq, session_key, inbound_json, status, outcome, admitted_at"
"""The columns ``ExchangeStatements.inbox_row`` selects."""


class ExchangeStatements(ABC):
    """A backend's exchange reads, on one connection."""

    @abstractmethod
    async def inbox_row(self, transport: str, delivery_id: str) -> Row | None:
        """The ``INBOX_ROW`` columns of the delivery's inbox row."""

    @abstractmethod
    async def final_parts(self, first: str) -> list[tuple[str, str]]:
        """The ``(text, target_json)`` of the rows keyed ``first`` or ``first:<anything>``, in the
        order recorded."""

    @abstractmethod
    async def outbox_text(self, idem_key: str) -> str | None: ...


async def api_exchange(sql: ExchangeStatements, transport: str, delivery_id: str) -> ApiExchange | None:
    """The admitted event and its final (or command reply) once committed; None if never admitted."""
    row = await sql.inbox_row(transport, delivery_id)
    if row is None:
        return None
    seq = int(row[0])
    parts = await sql.final_parts(f"final:{seq}")
    answer = (
        "".join(text for text, _ in parts)
        if parts
        else await sql.outbox_text(f"cmd:{transport}:{delivery_id}")
    )
    usage = Usage.loads(json.loads(parts[0][1]).get(USAGE_KEY)) if parts else None
    files = [
        OutFile.from_target(json.loads(target), text) for text, target in await sql.final_parts(f"file:{seq}")
    ]
    return ApiExchange(
        seq=seq,
        session_key=str(row[1]),
        inbound_json=json.loads(row[2]),
        status=str(row[3]),
        outcome=None if row[4] is None else str(row[4]),
        admitted_at=float(row[5]),
        answer=answer,
        usage=usage,
        files=tuple(f for f in files if f is not None),  # a refusal row names no file
    )
