"""The email adapter: IMAP in (``reader``), SMTP out (``outbound``), each thread a session.

Inbound: the reader hands each batch of new mail here; each mail is parsed (``parse``),
decoded (``decode``) and admitted through the intake, a thread's mails in UID order and
different threads concurrently; the reader stores its cursor only after. Mail that is not for
the agent (our own copies, auto-replies, bounces, lists, an empty reply) is skipped and
logged; mail it cannot read, or too large to fetch, is recorded as refused.

Outbound: ``deliver`` hands each outbox row to ``MailOutbound``. Email cannot edit what it
sent, so there are no previews: one mail per final (capabilities ``edit`` and ``drafts``
off), paced by the mailbox's sending budget (``sends_per_minute``, the rate budget's
``platform_max_rate``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
import time
from collections.abc import AsyncIterator

from chatgate.domain.inbound import Attachment, Inbound
from chatgate.domain.media import FileBody
from chatgate.domain.outbound import Capabilities, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Cursors
from chatgate.engine.ports import (
    WAIT_BRIEFLY,
    AdapterState,
    Admitted,
    Intake,
    Refused,
    Unavailable,
    Undecodable,
)
from chatgate.platforms.email.attachments import read_part
from chatgate.platforms.email.compose import Parent
from chatgate.platforms.email.decode import PLATFORM, TRANSPORT, Where, decode_mail, delivery_id
from chatgate.platforms.email.imap import ImapConnection, ImapSettings, TlsHolder
from chatgate.platforms.email.outbound import MailOutbound
from chatgate.platforms.email.parse import Mail, parse_mail
from chatgate.platforms.email.reader import Fetched, Reader, ReaderSettings
from chatgate.platforms.email.section import EmailSection
from chatgate.platforms.email.smtp import SmtpSettings
from chatgate.platforms.email.threads import our_chat
from chatgate.platforms.kit.skipped import Skipped

log = logging.getLogger(__name__)
Event = Inbound | Skipped | Undecodable
MAX_EMAIL_CHARS = 100_000
"""A reply longer than this is split into several mails (the engine splits at ``max_length``)."""


class EmailAdapter:
    """A ``MediaSource``: attachments are read again from the mailbox when a turn fetches them."""

    platform = PLATFORM

    def __init__(
        self,
        section: EmailSection,
        password: str,
        smtp_password: str,
        store: Cursors,
        intake: Intake,
        *,
        duplicate_marker: str = "",
    ) -> None:
        self._section = section
        self._store = store
        self._intake = intake
        self._tls = TlsHolder()
        self._imap = ImapSettings(
            section.imap_host,
            section.imap_port,
            section.imap_security == "tls",
            section.login,
            password,
            self._tls,
        )
        smtp = SmtpSettings(
            section.smtp_host,
            section.smtp_port,
            section.smtp_security,
            section.smtp_user or section.login,
            smtp_password,
            section.domain,
            self._tls,
        )
        self.outbound = MailOutbound(section, smtp, self._open, duplicate_marker)
        mailbox_id = f"{section.login}@{section.imap_host}/{section.mailbox}"
        self._url = f"imap://{section.login}@{section.imap_host}/{section.mailbox}"
        self.reader = Reader(
            self._open,
            store,
            self._handle_batch,
            ReaderSettings(
                section.mailbox,
                f"email:{mailbox_id}",
                section.max_message_bytes,
                section.idle,
                section.poll_seconds,
            ),
            self._set_state,
            self._after_batch,
        )
        self._salt_name = f"email:{section.address}:salt"
        self._connected = False
        self._detail = "not started"
        self._seen: list[int] = []
        self._own: list[int] = []

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            threads=True,
            max_length=MAX_EMAIL_CHARS,
            markdown="plain",
            platform_max_rate=self._section.sends_per_minute / 60.0,
            max_upload_bytes=self._section.max_file_bytes,
        )

    async def _open(self) -> ImapConnection:
        conn = ImapConnection(self._imap)
        try:
            await conn.open()
        except BaseException:
            await conn.close()
            raise
        return conn

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self._tls.context is None:  # reading the CA bundle is file I/O: in a thread, once
            self._tls.context = await asyncio.to_thread(ssl.create_default_context)
        salt = await self._store.get_cursor(self._salt_name)
        if not salt:
            salt = secrets.token_hex(8)
            await self._store.set_cursor(self._salt_name, salt)
        self.outbound.salt = salt
        self._detail = "connecting"
        self.reader.start()

    def stop_intake(self) -> None:
        self.reader.stop()

    async def aclose(self, budget: float = 5.0) -> None:
        """Stop reading (a batch being admitted finishes within ``budget``), close both connections."""
        self.reader.stop()
        await self.reader.wait_stopped(budget)
        await self.outbound.aclose()
        self._connected = False
        self._detail = "stopped"

    def state(self) -> AdapterState:
        return AdapterState(self._connected, self._detail)

    def _set_state(self, connected: bool, detail: str) -> None:
        self._connected = connected
        self._detail = f"{self._section.address}: {detail}"

    # ------------------------------------------------------------ inbound

    def _decode(self, fetched: Fetched) -> tuple[Event, Mail | None]:
        env = fetched.envelope
        where = Where(self._section.address, self._url, fetched.uidvalidity, env.uid, self._section.domain)
        if fetched.raw is None:
            reason = f"a mail of {env.size} bytes, over platforms.email.max_message_bytes: not read"
            return Undecodable(TRANSPORT, reason, delivery_id(where, ""), platform=PLATFORM), None
        mail = parse_mail(
            fetched.raw, max_depth=self._section.max_mime_depth, max_attachments=self._section.max_attachments
        )
        if isinstance(mail, Mail) and mail.problems:
            log.info("email: UID %d read with limits: %s", env.uid, "; ".join(mail.problems))
        if isinstance(mail, Mail) and fetched.before_renumbering and not mail.message_id:
            return Skipped("dated before the mailbox was renumbered, and no Message-ID to recognise it"), mail
        event = decode_mail(mail, where, env.internaldate or time.time())
        return event, mail if isinstance(mail, Mail) else None

    async def _handle_batch(self, fetched: list[Fetched]) -> int | None:
        # Parsing is CPU work on what strangers sent (up to max_message_bytes each): off the loop.
        decoded = await asyncio.to_thread(lambda: [self._decode(item) for item in fetched])
        lanes: dict[str, list[tuple[int, Event, Mail | None]]] = {}
        for item, (event, mail) in zip(fetched, decoded, strict=True):
            if isinstance(event, Inbound) and mail is not None and mail.message_id:
                self.outbound.remember(Parent(mail.message_id, mail.subject, tuple(mail.references)))
            lane = (event.source.chat_id or "") if isinstance(event, Inbound) else ""
            lanes.setdefault(lane, []).append((item.envelope.uid, event, mail))
        failed = await asyncio.gather(*(self._lane(items) for items in lanes.values()))
        retry = [uid for uid in failed if uid is not None]
        return min(retry) if retry else None

    async def _lane(
        self, items: list[tuple[int, Inbound | Skipped | Undecodable, Mail | None]]
    ) -> int | None:
        """One thread's mails in UID order; the UID to read again if one was not committed."""
        for uid, event, mail in items:
            if isinstance(event, Skipped):
                self._skipped(uid, event, mail)
                continue
            answer = await self._intake.submit(event, patience=WAIT_BRIEFLY)
            if isinstance(answer, Unavailable):
                log.warning("email: UID %d not saved, it will be read again: %s", uid, answer.reason)
                return uid
            if isinstance(answer, Refused):
                log.info(
                    "email: UID %d refused (%s): %s", uid, answer.code, answer.message,
                    extra={"platform": PLATFORM, "code": answer.code},
                )  # fmt: skip
            if isinstance(answer, Admitted | Refused):
                self._seen.append(uid)
        return None

    def _skipped(self, uid: int, event: Skipped, mail: Mail | None) -> None:
        log.info("email: UID %d not for the agent: %s", uid, event.reason)
        s = self._section
        if mail is not None and mail.sender == s.address and our_chat(mail.message_id, s.domain):
            self._own.append(uid)  # the bcc copy of a reply: filed into the Sent folder
        else:
            self._seen.append(uid)

    async def _after_batch(self, conn: ImapConnection) -> None:
        """Mark what was handled as seen (for a person looking at the mailbox), file our copies."""
        seen, self._seen = self._seen, []
        own, self._own = self._own, []
        await conn.store_seen(seen + own)
        if own and self._section.sent_copy == "bcc" and self._section.sent_folder != self._section.mailbox:
            await conn.move(own, self._section.sent_folder)

    # ------------------------------------------------------------ outbound

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        return await self.outbound.deliver(row)

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``FilePlatform``: a reply mail with the file attached, sent once like any reply (its
        Message-ID is the row's, found in the mailbox before a resend)."""
        return await self.outbound.deliver(row, (file, body))

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """``engine.ports.MediaSource``: an attachment's bytes, read again from the mailbox
        (``attachments.py``)."""
        s = self._section
        return read_part(attachment.ref, self._url, s.mailbox, s.max_message_bytes, self._open)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # mail cannot be edited: no previews (capabilities.drafts and edit are off)
