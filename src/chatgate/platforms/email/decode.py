"""A fetched mail as the gateway's event: an ``Inbound``, a ``Skipped`` or an ``Undecodable``.

Identity: the transport is ``email``; the delivery id is the mailbox and the mail's
Message-ID (what the server hands out again after a restart, and after a UIDVALIDITY change
renumbered the mailbox), or the UIDVALIDITY and UID for a mail without one. The source is
the thread (chat id from ``threads.thread_chat``, chat type ``dm``: one person's
conversation, so pairing works by address) and the sender's address as the user id; the
subject is the chat's label. Attachments are references (RFC 5092 IMAP URLs of their parts),
not bytes.
"""

from __future__ import annotations

import msgspec

from chatgate.domain.inbound import MAX_TEXT_CHARS, Attachment, Inbound
from chatgate.domain.source import Source
from chatgate.engine.ports import Undecodable
from chatgate.platforms.email.parse import Mail
from chatgate.platforms.email.threads import thread_chat
from chatgate.platforms.kit.skipped import Skipped

PLATFORM = "email"
TRANSPORT = "email"


class Where(msgspec.Struct, frozen=True):
    """Where a mail sits: the mailbox it was read from, and its place there."""

    address: str
    """The gateway's own address."""
    url: str
    """``imap://user@host/INBOX``: the base of attachment references."""
    uidvalidity: int
    uid: int
    domain: str
    """Our Message-IDs' domain (``threads``)."""


def delivery_id(where: Where, message_id: str) -> str:
    if message_id:
        return f"{where.address}:{message_id}"
    return f"{where.address}:uid:{where.uidvalidity}:{where.uid}"


def decode_mail(mail: Mail | str, where: Where, received_at: float) -> Inbound | Skipped | Undecodable:
    if isinstance(mail, str):
        return Undecodable(TRANSPORT, mail, delivery_id(where, ""), platform=PLATFORM)
    ident = delivery_id(where, mail.message_id)
    if mail.sender == where.address:
        return Skipped("our own mail (a reply's copy)")
    if mail.automatic is not None:
        return Skipped(f"never answered: {mail.automatic}")
    if not mail.text and not mail.attachments:
        return Skipped("nothing new in it (only quoted text, or empty)")
    if len(mail.text) > MAX_TEXT_CHARS:
        reason = f"the mail's text is {len(mail.text)} characters, over the {MAX_TEXT_CHARS} limit"
        return Undecodable(TRANSPORT, reason, ident, mail.text[:200], PLATFORM)
    chat = thread_chat(mail.message_id or ident, mail.in_reply_to, mail.references, where.domain)
    attachments = tuple(
        Attachment(
            kind="file",
            ref=f"{where.url};UIDVALIDITY={where.uidvalidity}/;UID={where.uid}/;SECTION={p.index}",
            mime=p.mime,
            name=p.name,
            size=p.size,
        )
        for p in mail.attachments
    )
    return Inbound(
        transport=TRANSPORT,
        delivery_id=ident,
        source=Source(
            platform=PLATFORM,
            chat_id=chat,
            chat_type="dm",
            user_id=mail.sender,
            user_name=mail.sender_name or None,
            chat_name=mail.subject or None,
        ),
        text=mail.text,
        message_ref=mail.message_id or None,
        reply_to=mail.in_reply_to[0] if mail.in_reply_to else None,
        received_at=received_at,
        attachments=attachments,
        payload={"email": {"subject": mail.subject, "uid": where.uid, "uidvalidity": where.uidvalidity}},
    )
