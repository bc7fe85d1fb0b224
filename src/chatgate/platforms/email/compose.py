"""A reply as a mail: threading headers, our Message-ID, the agent's text and nothing quoted.

The reply answers the mail named by the outbox row's ``in_reply_to``: ``In-Reply-To`` is that
mail's id, ``References`` its references and its id (the first, the thread's root, always
kept), ``Subject`` its subject with one ``Re:``. It quotes nothing: the person's mail is in
their thread already, and the agent's text is all the body says. ``Auto-Submitted:
auto-replied`` (RFC 3834) tells other responders not to answer it, which keeps two robots
from talking to each other forever.
"""

from __future__ import annotations

import re
from email.message import EmailMessage
from email.utils import formataddr, formatdate

import msgspec

from chatgate.platforms.email.threads import MAX_IDS

_RE = re.compile(r"^\s*((re|aw|sv|antw|fwd?)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)


class Parent(msgspec.Struct, frozen=True):
    """What a reply needs of the mail it answers."""

    message_id: str
    subject: str
    references: tuple[str, ...]


def reply_subject(subject: str) -> str:
    bare = _RE.sub("", subject).strip()
    return f"Re: {bare}" if bare else "Re: your message"


def thread_references(parent: Parent | None, in_reply_to: str | None) -> list[str]:
    refs = list(parent.references) if parent is not None else []
    if in_reply_to and in_reply_to not in refs:
        refs.append(in_reply_to)
    if len(refs) > MAX_IDS:
        refs = refs[:1] + refs[-(MAX_IDS - 1) :]
    return refs


def compose(
    *,
    sender: str,
    display_name: str,
    to: str,
    message_id: str,
    text: str,
    in_reply_to: str | None,
    parent: Parent | None,
) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = formataddr((display_name, sender)) if display_name else sender
    msg["To"] = to
    msg["Subject"] = reply_subject(parent.subject if parent is not None else "")
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = f"<{message_id}>"
    if in_reply_to:
        msg["In-Reply-To"] = f"<{in_reply_to}>"
    refs = thread_references(parent, in_reply_to)
    if refs:
        msg["References"] = " ".join(f"<{r}>" for r in refs)
    msg["Auto-Submitted"] = "auto-replied"
    msg.set_content(text)
    return msg
