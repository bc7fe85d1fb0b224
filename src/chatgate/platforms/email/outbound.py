"""Outgoing mail: each outbox row once, even across a crash after the SMTP server accepted it.

SMTP has no idempotency of its own, so the mailbox is the ledger's witness:

1. The reply's Message-ID is derived from the row's idempotency key and the mailbox's salt
   (``threads.reply_message_id``): the same row always has the same Message-ID, recorded
   before the first send by being a function of what the outbox stores.
2. A copy with that Message-ID lands in the mailbox as part of the sending: with ``sent_copy:
   bcc`` the SMTP transaction itself also delivers it to this mailbox (so the server's
   acceptance and the copy are one event); with ``append`` the copy is APPENDed to
   ``sent_folder`` right after the server accepted; with ``provider`` the provider files it.
3. A row that may already be out (``possibly_duplicate``: it was ``sending`` at a crash, or its
   send was ambiguous) is first looked for by that Message-ID (the inbox, then ``sent_folder``).
   Found: it is ``Delivered`` without a second send. Not found: it is sent. With ``append`` a
   crash between the server's acceptance and the APPEND leaves no copy, so that resend carries
   the duplicate marker; with ``bcc`` none is needed.
"""

from __future__ import annotations

import asyncio
import email.policy
import functools
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from email.message import EmailMessage
from email.parser import BytesParser

from chatgate.domain.media import BlobGone, FileBody
from chatgate.domain.outbound import Delivered, DeliveryResult, Rejected, RetryLater
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.engine.ports import marked_text
from chatgate.platforms.email import smtp
from chatgate.platforms.email.compose import Parent, compose
from chatgate.platforms.email.faults import crash_point
from chatgate.platforms.email.imap import ImapConnection, ImapError, quoted
from chatgate.platforms.email.section import EmailSection
from chatgate.platforms.email.threads import ids_in, reply_message_id

log = logging.getLogger(__name__)
MAX_PARENTS = 4096
"""Parents remembered from intake (a miss reads the mailbox, so this is only a shortcut)."""
MAX_GUARDED_THREADS = 10_000

Attached = tuple[OutFile, FileBody]
"""A file row's file, sent as the reply mail's attachment."""


async def _attach(message: EmailMessage, file: OutFile, body: FileBody) -> bool:
    """The file as the mail's attachment (read whole: a mail is sent whole, and the section's
    ``max_file_bytes`` bounds it); False when its blob is gone."""
    try:
        data = await body.read()
    except BlobGone:
        return False
    maintype, _, subtype = file.mime.partition("/")
    attach = functools.partial(message.add_attachment, maintype=maintype, subtype=subtype or "octet-stream")
    await asyncio.to_thread(attach, data, filename=file.name)  # base64 of up to 10 MB, off the loop
    return True


class LoopGuard:
    """At most ``per_hour`` replies per thread within any hour (in memory: a restart forgets)."""

    def __init__(self, per_hour: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_hour = per_hour
        self._clock = clock
        self._sent: OrderedDict[str, deque[float]] = OrderedDict()

    def allows(self, chat: str) -> bool:
        times = self._sent.get(chat)
        if times is None:
            return True
        horizon = self._clock() - 3600.0
        while times and times[0] <= horizon:
            times.popleft()
        return len(times) < self._per_hour

    def record(self, chat: str) -> None:
        times = self._sent.setdefault(chat, deque())
        times.append(self._clock())
        self._sent.move_to_end(chat)
        while len(self._sent) > MAX_GUARDED_THREADS:
            self._sent.popitem(last=False)


class MailOutbound:
    def __init__(
        self,
        section: EmailSection,
        smtp_settings: smtp.SmtpSettings,
        connect: Callable[[], Awaitable[ImapConnection]],
        duplicate_marker: str,
    ) -> None:
        self._section = section
        self._smtp = smtp_settings
        self._connect = connect
        self._marker = duplicate_marker
        self._parents: OrderedDict[str, Parent] = OrderedDict()
        self._conn: ImapConnection | None = None
        self._lock = asyncio.Lock()
        self.guard = LoopGuard(section.replies_per_thread_per_hour)
        self.salt: str | None = None
        """Set by the adapter's start (a ``Cursors`` entry): Message-IDs depend on it."""

    def remember(self, parent: Parent) -> None:
        self._parents[parent.message_id] = parent
        self._parents.move_to_end(parent.message_id)
        while len(self._parents) > MAX_PARENTS:
            self._parents.popitem(last=False)

    async def aclose(self) -> None:
        async with self._lock:
            await self._drop()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _mailbox(self) -> ImapConnection:
        if self._conn is None:
            self._conn = await self._connect()
        return self._conn

    async def _find(self, message_id: str) -> bool:
        """Whether a mail with this Message-ID is in the mailbox already (our copy of a reply)."""
        s = self._section
        folders = [s.mailbox, s.sent_folder] if s.sent_copy == "bcc" else [s.sent_folder]
        async with self._lock:
            try:
                conn = await self._mailbox()
                for folder in folders:
                    await conn.select(folder)
                    if await conn.search("HEADER", "Message-ID", quoted(f"<{message_id}>")):
                        return True
                return False
            except ImapError:
                await self._drop()
                raise

    async def _parent(self, message_id: str | None) -> Parent | None:
        """The mail being answered: remembered from intake, else read from the mailbox."""
        if not message_id:
            return None
        known = self._parents.get(message_id)
        if known is not None:
            return known
        async with self._lock:
            try:
                conn = await self._mailbox()
                await conn.select(self._section.mailbox)
                uids = await conn.search("HEADER", "Message-ID", quoted(f"<{message_id}>"))
                bodies = await conn.bodies(uids[-1:], "HEADER.FIELDS (SUBJECT REFERENCES)")
            except ImapError:
                await self._drop()
                raise
        if not bodies:
            return None
        head = BytesParser(policy=email.policy.default).parsebytes(next(iter(bodies.values())))
        subject = " ".join(str(head.get("Subject") or "").split())[:500]
        parent = Parent(message_id, subject, tuple(ids_in(str(head.get("References") or ""))))
        self.remember(parent)
        return parent

    async def deliver(self, row: OutboxRow, attached: Attached | None = None) -> DeliveryResult:
        """The row as a reply mail (``attached``: a file row's file, attached to it)."""
        s = self._section
        to = str(row.target.get("user_id") or "")
        if "@" not in to:
            return Rejected("the row names no recipient address")
        if self.salt is None:
            return RetryLater("the email adapter has not started", 5.0)
        message_id = reply_message_id(self.salt, row.idem_key, row.chat_id, s.domain)
        try:
            if row.possibly_duplicate and await self._find(message_id):
                log.info(
                    "email: %s was sent before a restart (found in the mailbox): not sent again", row.idem_key
                )
                return Delivered(message_id)
            parent = await self._parent(row.in_reply_to)
        except ImapError as exc:
            return RetryLater(f"could not read the mailbox before sending: {exc}", 10.0)
        if not self.guard.allows(row.chat_id):
            return Rejected(
                f"loop guard: {s.replies_per_thread_per_hour} replies in this thread within the hour"
                " (platforms.email.replies_per_thread_per_hour)"
            )
        text = row.text if s.sent_copy == "bcc" else marked_text(row, self._marker)
        message = compose(
            sender=s.address,
            display_name=s.display_name,
            to=to,
            message_id=message_id,
            text=text if text.strip() or attached is None else attached[0].name,
            in_reply_to=row.in_reply_to,
            parent=parent,
        )
        if attached is not None:
            file, body = attached
            try:
                data = await body.read()  # a mail is sent whole; max_file_bytes bounds it
            except BlobGone:
                return Rejected(f"the file {file.name} is no longer stored")
            maintype, _, subtype = file.mime.partition("/")
            message.add_attachment(
                data, maintype=maintype, subtype=subtype or "octet-stream", filename=file.name
            )
        recipients = [to, s.address] if s.sent_copy == "bcc" and to != s.address else [to]
        result = await smtp.send(self._smtp, message, s.address, recipients)
        if not isinstance(result, Delivered):
            return result
        self.guard.record(row.chat_id)
        # tests: a SIGKILL between the server's acceptance and the ledger (of a reply, or of a file)
        crash_point("after_smtp" if attached is None else "after_smtp_file")
        if s.sent_copy == "append":
            await self._append(message.as_bytes(policy=email.policy.SMTP), row.idem_key)
        return result

    async def _append(self, data: bytes, idem_key: str) -> None:
        async with self._lock:
            try:
                conn = await self._mailbox()
                await conn.append(self._section.sent_folder, data)
            except ImapError as exc:
                await self._drop()
                log.warning(
                    "email: %s was sent but not copied to %s: %s", idem_key, self._section.sent_folder, exc
                )
        crash_point("after_append")
