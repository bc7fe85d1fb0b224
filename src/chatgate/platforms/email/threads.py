"""Threads and Message-IDs: which conversation a mail belongs to, and the ids of our replies.

A thread is named by its root, the first Message-ID of ``References`` (RFC 5322 keeps it when
a client trims the list), else ``In-Reply-To``, else the mail's own id: the chat id is a hash
of that root, so it is short and safe whatever a stranger put in the header.

Our replies' Message-IDs carry the chat id (``<cg.<key hash>.<chat id>@<domain>>``), so a
reply to one of our mails joins its thread even from a client that sends only
``In-Reply-To``, and the key hash is derived from the outbox row's idempotency key and a
per-mailbox salt: the same row always gets the same Message-ID (a resend can look for it),
and a new database (whose keys start again at ``final:1``) gets new ones.
"""

from __future__ import annotations

import hashlib
import re

MAX_IDS = 40
"""References kept from a header (the first and the last ones): a stranger's header is bounded."""
_ID = re.compile(r"<([^<>\s]{1,250})>")
_OURS = re.compile(r"^cg\.[0-9a-f]{20}\.(t[0-9a-f]{24})@(.+)$")


def ids_in(header: str | None) -> list[str]:
    """The Message-IDs in a header value, without brackets, at most ``MAX_IDS`` (first kept)."""
    if not header:
        return []
    found = _ID.findall(header[:20_000])
    if len(found) > MAX_IDS:
        found = found[:1] + found[-(MAX_IDS - 1) :]
    return found


def chat_of_root(root: str) -> str:
    return "t" + hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def our_chat(message_id: str, domain: str) -> str | None:
    """The chat id inside one of our own Message-IDs, or None."""
    match = _OURS.match(message_id)
    if match is None or match.group(2).lower() != domain.lower():
        return None
    return match.group(1)


def thread_chat(message_id: str, in_reply_to: list[str], references: list[str], domain: str) -> str:
    """The chat id of the thread a mail belongs to."""
    for ref in [*in_reply_to, *reversed(references)]:
        ours = our_chat(ref, domain)
        if ours is not None:
            return ours
    root = references[0] if references else in_reply_to[0] if in_reply_to else message_id
    return chat_of_root(root)


def reply_message_id(salt: str, idem_key: str, chat_id: str, domain: str) -> str:
    """The Message-ID (without brackets) of the reply an outbox row is: stable for the row."""
    digest = hashlib.sha256(f"{salt}\x00{idem_key}".encode()).hexdigest()[:20]
    return f"cg.{digest}.{chat_id}@{domain}"
