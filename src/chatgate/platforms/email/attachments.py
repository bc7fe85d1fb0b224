"""An email attachment's bytes, read again from the mailbox when the fetch step asks.

Admission keeps each attachment as a reference (``decode``: an RFC 5092 IMAP URL naming the
mailbox, its UIDVALIDITY, the mail's UID and the part's section). The fetch step
(``engine.ports.MediaSource``) comes here: a connection of its own fetches the mail again
(``BODY.PEEK``: still unread for a person), the part is decoded from its transfer encoding in
a thread, and its bytes are handed on in slices. Nothing is kept in between, so a process
killed mid-fetch fetches again after the restart. The mail was bounded by
``max_message_bytes`` when it was first read; the same bound holds here.

A reference to another mailbox, a renumbered mailbox (UIDVALIDITY changed) or a mail that
is gone (deleted, moved) is a ``MediaRefused`` saying so.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec

from chatgate.domain.media import MediaRefused
from chatgate.platforms.email.imap import ImapConnection, ImapError
from chatgate.platforms.email.parse import part_bytes

SLICE_BYTES = 256 * 1024
_REF = re.compile(
    r"(?P<base>.+);UIDVALIDITY=(?P<validity>\d+)/;UID=(?P<uid>\d+)/;SECTION=(?P<section>[\d.]+)"
)


class PartRef(msgspec.Struct, frozen=True):
    base: str
    uidvalidity: int
    uid: int
    section: str


def parse_ref(ref: str) -> PartRef | None:
    match = _REF.fullmatch(ref)
    if match is None:
        return None
    return PartRef(match["base"], int(match["validity"]), int(match["uid"]), match["section"])


async def _slices(data: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(data), SLICE_BYTES):
        yield data[start : start + SLICE_BYTES]


async def read_part(
    ref: str, base: str, mailbox: str, max_bytes: int, connect: Callable[[], Awaitable[ImapConnection]]
) -> AsyncIterator[bytes]:
    """The attachment ``ref`` names, from this adapter's mailbox (``base``)."""
    part = parse_ref(ref)
    if part is None or part.base != base:
        raise MediaRefused("the attachment is not in this gateway's mailbox")
    try:
        conn = await connect()
    except ImapError as exc:
        raise MediaRefused(f"the mailbox could not be reached ({exc})") from None
    try:
        selected = await conn.select(mailbox)
        if selected.uidvalidity != part.uidvalidity:
            raise MediaRefused("the mailbox was renumbered since the mail arrived; the mail cannot be found")
        raw = (await conn.bodies([part.uid])).get(part.uid)
    except ImapError as exc:
        raise MediaRefused(f"the mailbox could not be read ({exc})") from None
    finally:
        await conn.close()
    if raw is None:
        raise MediaRefused("the mail is no longer in the mailbox (deleted or moved)")
    if len(raw) > max_bytes:
        raise MediaRefused("the mail is now larger than platforms.email.max_message_bytes")
    data = await asyncio.to_thread(part_bytes, raw, part.section)
    if data is None:
        raise MediaRefused("the mail has no such attachment")
    async for chunk in _slices(data):
        yield chunk
