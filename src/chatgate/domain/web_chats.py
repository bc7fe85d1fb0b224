"""A signed-in user's web chats: who owns each, its title, and its history as the page shows it.

With accounts, a chat id is no longer a credential: the store records the account that
opened each chat, and only that account may open it again, list it or read its history.
The history is read back from what the pipeline already stores (the inbox for the user's
messages, the outbox for replies and notices, approvals for prompt cards), so nothing is
written twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from chatgate.domain.outbound import FAILURE_KEY
from chatgate.domain.outfiles import OutFile
from chatgate.domain.tool_steps import ToolStep, steps_of

TITLE_CHARS = 80
MAX_LIST = 100
MAX_HISTORY_PAGE = 200
MAX_QUERY_CHARS = 200
REGENERATES_KEY = "regenerates"
"""Inbound payload key of a message Regenerate sent: the id of the message it asks again, so
history folds exactly the regenerated answers (never a question typed twice)."""
DELETED_OWNER = "!deleted"
"""The owner of a deleted chat: nobody's, so no list shows it and no hello reopens it."""
NO_ROOM = "!full"
"""What claiming a new chat answers when its would-be owner already has the most they may."""
MAX_CONVERSATIONS_PER_USER = 1000
MAX_SEARCH_WORDS = 8
_WORD = re.compile(r"\w+")

HistoryKind = Literal["me", "bot", "notice", "failure", "prompt"]


class ChatSummary(msgspec.Struct, frozen=True):
    chat_id: str
    title: str | None
    created_at: float
    last_activity: float


class HistoryItem(msgspec.Struct, frozen=True):
    """One bubble or card, with the ids the page's protocol frames carry (so it dedupes)."""

    kind: HistoryKind
    id: str
    text: str
    at: float
    in_reply_to: str | None = None
    outcome: str | None = None
    """A prompt's state (``pending``, ``approved``, ``denied``, ``expired``)."""
    file: OutFile | None = None
    """The file a reply row carries (``domain/outfiles.py``): the page links it again."""
    steps: tuple[ToolStep, ...] = ()
    """A final's tool steps (``domain/tool_steps.py``): what the agent did on the way."""
    regenerates: str | None = None
    """A user's message sent by Regenerate: the id of the message whose answer it asks again."""


def title_of(text: str) -> str:
    """A conversation's title: its first message on one line, trimmed to ``TITLE_CHARS``."""
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def like_pattern(query: str) -> str:
    """A case-insensitive substring pattern for ``LIKE … ESCAPE '\\'`` (wildcards taken literally)."""
    escaped = query.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def search_words(query: str) -> list[str]:
    """The words a search looks for (each as a word prefix, all of them in one conversation).

    Only word characters pass, so no dialect's full-text syntax can be injected; an empty list
    means the query has no word, and only titles are searched."""
    return [w.lower() for w in _WORD.findall(query)][:MAX_SEARCH_WORDS]


def message_item(inbound: dict[str, object], at: float) -> HistoryItem | None:
    """A user's message as the page shows it (taps and other kinds are not bubbles)."""
    if inbound.get("kind", "text") != "text" or not isinstance(inbound.get("text"), str):
        return None
    ident = inbound.get("message_ref")
    payload = inbound.get("payload")
    again = payload.get(REGENERATES_KEY) if isinstance(payload, dict) else None
    regenerates = again if isinstance(again, str) and again else None
    return HistoryItem("me", str(ident or ""), str(inbound["text"]), at, regenerates=regenerates)


def reply_item(
    row_id: int, kind: str, text: str, in_reply_to: str | None, target: Mapping[str, Any], at: float
) -> HistoryItem:
    """An outbox row as the page shows it, with the ``o<id>`` its live frame carries (and its file)."""
    failure = target.get(FAILURE_KEY)
    shown: HistoryKind = "notice" if kind == "notice" else "failure" if failure else "bot"
    file = OutFile.from_target(target)
    steps = steps_of(target)
    return HistoryItem(shown, f"o{row_id}", text, at, in_reply_to=in_reply_to, file=file, steps=steps)


def newest_first(items: list[HistoryItem], limit: int) -> list[HistoryItem]:
    """The newest ``limit`` of several sources' items, returned oldest first."""
    items.sort(key=lambda i: i.at, reverse=True)
    return list(reversed(items[:limit]))
