"""One fetched mail as a plain value: who, which thread, what they wrote, what must not be answered.

Everything here reads what a stranger wrote, so everything is bounded: the mail's size
before it is fetched (the reader), the MIME tree's depth and the number of parts walked, the
number of attachments kept, each header's length, the number of Message-IDs read from a
header. A mail the parser cannot read at all is an error value, never an exception.
"""

from __future__ import annotations

import email.policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import parseaddr

import msgspec

from chatgate.platforms.email.text import html_to_text, what_they_wrote
from chatgate.platforms.email.threads import ids_in

MAX_HEADER_CHARS = 2000
"""A header value read beyond this is cut (a subject, a name); ids have their own bound."""
MAX_PARTS = 200
"""MIME parts walked at most, whatever the depth."""
MAX_BODY_CHARS = 200_000
"""Text decoded from one body part at most (admission's own limit is lower)."""
_LIST_HEADERS = ("list-id", "list-unsubscribe", "list-post", "mailing-list")
_BULK = frozenset({"bulk", "list", "junk", "auto_reply", "autoreply"})
_DAEMONS = ("mailer-daemon", "postmaster", "noreply", "no-reply", "do-not-reply", "donotreply")


class Part(msgspec.Struct, frozen=True):
    """An attachment, kept as a reference: where it is, not its bytes."""

    index: str
    """The part's position in the MIME tree (IMAP's section number, ``2`` or ``1.3``)."""
    mime: str
    name: str | None
    size: int


class Mail(msgspec.Struct, frozen=True):
    message_id: str
    in_reply_to: list[str]
    references: list[str]
    sender: str
    """The From address, lower-cased ("" when there is none)."""
    sender_name: str
    subject: str
    text: str
    """What the person wrote: text, or HTML reduced to text, without quoted history or signature."""
    attachments: list[Part] = msgspec.field(default_factory=list)
    automatic: str | None = None
    """Why this mail must never be answered (an auto-reply, a bounce, a list), or None."""
    problems: list[str] = msgspec.field(default_factory=list)
    """Bounds that were hit while reading (parts skipped, attachments dropped), for the log."""


def _header(msg: Message, name: str) -> str:
    try:
        value = msg.get(name)
    except Exception:  # a header the policy cannot parse is treated as absent
        return ""
    return str(value or "")[:MAX_HEADER_CHARS].strip()


def automatic_reason(msg: Message, sender: str, envelope_sender: str | None) -> str | None:
    """Why a mail is machine-made and must not be answered (RFC 3834, list headers, bounces)."""
    auto = _header(msg, "Auto-Submitted").lower()
    if auto and auto != "no":
        return f"Auto-Submitted: {auto}"
    precedence = _header(msg, "Precedence").lower()
    if precedence in _BULK:
        return f"Precedence: {precedence}"
    for name in _LIST_HEADERS:
        if _header(msg, name):
            return f"a mailing list ({name})"
    if envelope_sender is not None and envelope_sender.strip() in ("<>", ""):
        return "a null sender (<>): a bounce or a notification"
    for name in ("X-Autoreply", "X-Autorespond"):
        if _header(msg, name):
            return f"{name} is set"
    if msg.get_content_type() == "multipart/report":
        return "a delivery or read report (multipart/report)"
    local = sender.partition("@")[0]
    if not sender or local.startswith(_DAEMONS):
        return f"sent by {sender or 'nobody'} (a daemon or a no-reply address)"
    return None


def _raw_header(msg: Message, name: str) -> str:
    """A header's value for reading ids from, bounded (References may list hundreds)."""
    try:
        value = msg.get(name)
    except Exception:
        return ""
    return str(value or "")[:20_000]


def _decoded(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "utf-8"
    try:
        text = payload.decode(charset, errors="replace")
    except LookupError:  # an unknown charset name
        text = payload.decode("utf-8", errors="replace")
    return text[:MAX_BODY_CHARS]


class _Walk(msgspec.Struct):
    max_depth: int
    max_attachments: int
    plain: list[str] = msgspec.field(default_factory=list)
    html: list[str] = msgspec.field(default_factory=list)
    attachments: list[Part] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    seen: int = 0

    def walk(self, part: Message, index: str, depth: int) -> None:
        self.seen += 1
        if self.seen > MAX_PARTS:
            if self.seen == MAX_PARTS + 1:
                self.problems.append(f"more than {MAX_PARTS} MIME parts: the rest skipped")
            return
        if part.is_multipart():
            if depth >= self.max_depth:
                self.problems.append(f"MIME nested deeper than {self.max_depth}: skipped below {index}")
                return
            children = part.get_payload()
            if isinstance(children, list):
                for n, child in enumerate(children, 1):
                    if isinstance(child, Message):
                        self.walk(child, f"{index}.{n}" if index else str(n), depth + 1)
            return
        self._leaf(part, index or "1")

    def _leaf(self, part: Message, index: str) -> None:
        ctype = part.get_content_type()
        disposition = (part.get_content_disposition() or "").lower()
        name = part.get_filename()
        if disposition != "attachment" and not name and ctype in ("text/plain", "text/html"):
            (self.plain if ctype == "text/plain" else self.html).append(_decoded(part))
            return
        if len(self.attachments) >= self.max_attachments:
            if len(self.attachments) == self.max_attachments:
                self.problems.append(f"more than {self.max_attachments} attachments: the rest dropped")
                self.max_attachments = -1  # say it once
            return
        raw = part.get_payload(decode=True)
        size = len(raw) if isinstance(raw, bytes) else 0
        self.attachments.append(Part(index, ctype, (name or "")[:200] or None, size))


def parse_mail(raw: bytes, *, max_depth: int = 8, max_attachments: int = 20) -> Mail | str:
    """The mail, or the reason it cannot be read."""
    try:
        msg = BytesParser(policy=email.policy.default).parsebytes(raw)
    except Exception as exc:  # the parser is lenient; this is a last resort
        return f"unreadable mail ({type(exc).__name__})"
    assert isinstance(msg, EmailMessage)
    name, address = parseaddr(_header(msg, "From"))
    sender = address.strip().lower()
    ids = ids_in(_header(msg, "Message-ID"))
    walk = _Walk(max_depth, max_attachments)
    walk.walk(msg, "", 0)
    body = "\n".join(t for t in walk.plain if t.strip())
    if not body.strip() and walk.html:
        body = "\n".join(html_to_text(h) for h in walk.html)
    return Mail(
        message_id=ids[0] if ids else "",
        in_reply_to=ids_in(_header(msg, "In-Reply-To"))[:1],
        references=ids_in(_raw_header(msg, "References")),
        sender=sender,
        sender_name=name.strip()[:200],
        subject=" ".join(_header(msg, "Subject").split())[:500],
        text=what_they_wrote(body),
        attachments=walk.attachments,
        automatic=automatic_reason(msg, sender, _raw_header(msg, "Return-Path") or None),
        problems=walk.problems,
    )


def part_bytes(raw: bytes, section: str) -> bytes | None:
    """The decoded bytes of the part at ``section`` (numbered as ``_Walk`` numbers attachments:
    ``2``, ``1.3``; a single-part mail's body is ``1``), or None when the mail has no such part."""
    msg = BytesParser(policy=email.policy.default).parsebytes(raw)
    part: Message = msg
    if not msg.is_multipart():
        if section != "1":
            return None
    else:
        for step in section.split("."):
            if not step.isdigit() or not part.is_multipart():
                return None
            children = part.get_payload()
            n = int(step) - 1
            if not isinstance(children, list) or not 0 <= n < len(children):
                return None
            child = children[n]
            if not isinstance(child, Message):
                return None
            part = child
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else None
