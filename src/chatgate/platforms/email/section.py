"""``platforms.email``: the keys of the email section (docs/platforms/email.md)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from chatgate.platforms.kit.section import EnvName, PlatformSection

ImapSecurity = Literal["tls", "none"]
SmtpSecurity = Literal["tls", "starttls", "none"]
SentCopy = Literal["bcc", "append", "provider"]


class EmailSection(PlatformSection, kw_only=True):
    numbers_as_text: ClassVar[bool] = True

    address: str = ""
    """The mailbox's own address: replies come from it (required when enabled)."""
    display_name: str = ""
    """The name shown with ``address`` on replies (empty: the address alone)."""
    password_env: EnvName | None = None
    """Variable holding the mailbox password (an app password for Gmail, Outlook, Fastmail)."""

    imap_host: str = ""
    imap_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 993
    imap_security: ImapSecurity = "tls"
    """``tls`` (implicit TLS, port 993) or ``none`` (plain text: a local test server only)."""
    imap_user: str = ""
    """The IMAP login (empty: ``address``)."""
    mailbox: str = "INBOX"
    """The folder read for incoming mail."""

    smtp_host: str = ""
    smtp_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] = 587
    smtp_security: SmtpSecurity = "starttls"
    """``starttls`` (port 587), ``tls`` (implicit TLS, port 465) or ``none`` (a local test server)."""
    smtp_user: str = ""
    """The SMTP login (empty: the IMAP login); ``smtp_password_env`` if it differs."""
    smtp_password_env: EnvName | None = None

    sent_folder: str = "Sent"
    """Where replies are kept, and where a resend after a crash looks for them first."""
    sent_copy: SentCopy = "bcc"
    """How the Sent copy is made: ``bcc`` (the reply is also addressed to this mailbox, so the SMTP
    server's acceptance itself files a copy: no window for a duplicate), ``append`` (an IMAP APPEND
    after the SMTP server accepted), ``provider`` (the provider files submissions itself: Gmail)."""

    idle: bool = True
    """Wait for new mail with IMAP IDLE where the server has it; otherwise poll."""
    poll_seconds: Annotated[float, msgspec.Meta(ge=0.2, le=3600)] = 60.0
    """The polling interval without IDLE, and the longest IDLE before a fresh look."""

    allow_from: list[str] = []
    """Senders allowed to talk to the agent: addresses (``ann@example.com``) or whole domains
    (``@example.com``); everyone else is refused (default deny)."""
    allow_all: bool = False
    pairing: bool = False
    """Strangers get a one-time code by mail for the operator (``chatgate pairing``)."""

    sends_per_minute: Annotated[float, msgspec.Meta(gt=0, le=6000)] = 20.0
    """The mailbox's sending budget (providers limit it: Gmail about 20 a minute)."""
    replies_per_thread_per_hour: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 12
    """Loop guard: a thread that got this many replies within the hour gets no more until it cools."""

    max_message_bytes: Annotated[int, msgspec.Meta(ge=10_000, le=50_000_000)] = 2_000_000
    """Larger mail is not downloaded: it is recorded as refused, and its sender is not answered."""
    max_attachments: Annotated[int, msgspec.Meta(ge=0, le=1000)] = 20
    max_file_bytes: Annotated[int, msgspec.Meta(ge=0, le=35_000_000)] = 10_000_000
    """The largest file the agent may send as an attachment (0: none). Base64 makes the mail a
    third larger, and providers refuse mail over 25 MB (Gmail) or less, so 10 MB stays safe."""
    max_mime_depth: Annotated[int, msgspec.Meta(ge=1, le=50)] = 8

    message_id_domain: str = ""
    """The domain of the Message-IDs of replies (empty: the domain of ``address``)."""

    def __post_init__(self) -> None:
        self.address = self.address.strip().lower()
        if self.enabled and ("@" not in self.address or not self.imap_host or not self.smtp_host):
            raise ValueError("address, imap_host and smtp_host are required when platforms.email is enabled")
        for entry in self.allow_from:
            if "@" not in entry:
                raise ValueError(f"allow_from: {entry!r} is neither an address nor an @domain")

    @property
    def login(self) -> str:
        return self.imap_user or self.address

    @property
    def domain(self) -> str:
        return self.message_id_domain or self.address.rpartition("@")[2] or "localhost"
