"""Approval prompts as Matrix messages answered by reactions (Matrix has no buttons).

A prompt is a message whose content also carries ``org.chatgate.prompt`` (the prompt id and
which reaction means which answer), with the bot's own reaction of each answer under it so a
person taps one. A person's ``m.reaction`` on it becomes a ``button`` event carrying the
``prompt_response`` admission resolves (first, then renders: a late or stale tap is told
"expired — not run"). The prompt's meaning travels in the event itself, so a tap after a
restart, when no process remembers sending it, is still read right.
"""

from __future__ import annotations

from typing import Any

import msgspec

from chatgate.domain.inbound import Inbound
from chatgate.domain.prompts import OPTION_IDS, PROMPT_ID_RE, Prompt
from chatgate.platforms.kit.skipped import Skipped
from chatgate.platforms.matrix.decode import TRANSPORT, RoomInfo, delivery_id, relation, source_of

PROMPT_KEY = "org.chatgate.prompt"
REACTIONS: dict[str, str] = {"once": "✅", "session": "🔁", "always": "♾️", "deny": "❌"}
ALIASES: dict[str, str] = {"👍": "once", "👎": "deny", "✔": "once", "✖": "deny"}


def bare(key: str) -> str:
    """A reaction key without variation selectors (clients send ``♾`` or ``♾️``)."""
    return key.replace("\ufe0f", "").strip()


class PromptRef(msgspec.Struct, frozen=True):
    """What a prompt event says about itself: its id and its answers by reaction."""

    prompt_id: str
    options: dict[str, str]
    """Bare reaction key -> option id."""
    thread: str | None = None


def prompt_content(prompt: Prompt, text: str, relates_to: dict[str, Any] | None) -> dict[str, Any]:
    shown = {REACTIONS[o.id]: o.id for o in prompt.options if o.id in REACTIONS}
    legend = ", ".join(f"{key} {o.label.lower()}" for o in prompt.options if (key := REACTIONS.get(o.id)))
    body = text.replace("with a button below", "with a reaction below") + f"\nReact: {legend}."
    content: dict[str, Any] = {
        "msgtype": "m.text",
        "body": body,
        PROMPT_KEY: {"prompt_id": prompt.prompt_id, "options": shown},
        "m.mentions": {},
    }
    if relates_to:
        content["m.relates_to"] = relates_to
    return content


def prompt_ref(event: dict[str, Any], bot_id: str) -> PromptRef | None:
    """The prompt an event is, if the bot sent it as one."""
    content = event.get("content")
    if event.get("sender") != bot_id or not isinstance(content, dict):
        return None
    meta = content.get(PROMPT_KEY)
    if not isinstance(meta, dict) or not isinstance(meta.get("options"), dict):
        return None
    prompt_id = meta.get("prompt_id")
    if not isinstance(prompt_id, str) or not PROMPT_ID_RE.fullmatch(prompt_id):
        return None
    options = {bare(k): v for k, v in meta["options"].items() if isinstance(k, str) and v in OPTION_IDS}
    rel = relation(content)
    thread = rel.get("event_id") if rel.get("rel_type") == "m.thread" else None
    return PromptRef(prompt_id, options, thread if isinstance(thread, str) else None)


def reacted_to(event: dict[str, Any]) -> tuple[str, str] | None:
    """``(event id, key)`` of an ``m.annotation`` reaction."""
    content = event.get("content")
    rel = relation(content) if isinstance(content, dict) else {}
    target, key = rel.get("event_id"), rel.get("key")
    if rel.get("rel_type") != "m.annotation" or not isinstance(target, str) or not isinstance(key, str):
        return None
    return target, key


def decode_reaction(
    event: dict[str, Any], room: RoomInfo, prompt: PromptRef, *, sender_name: str | None, received_at: float
) -> Inbound | Skipped:
    """A person's reaction on a prompt: the answer it stands for, as a button press."""
    found = reacted_to(event)
    event_id, sender = event.get("event_id"), event.get("sender")
    if found is None or not isinstance(event_id, str) or not isinstance(sender, str):
        return Skipped("a reaction without a target, a key, an id or a sender")
    target, key = found
    option = prompt.options.get(bare(key)) or ALIASES.get(bare(key))
    if option is None:
        return Skipped(f"reaction {key[:8]!r} is not one of the prompt's answers")
    content = {"m.relates_to": {"rel_type": "m.thread", "event_id": prompt.thread}} if prompt.thread else {}
    return Inbound(
        transport=TRANSPORT,
        delivery_id=delivery_id(room.room_id, event_id),
        source=source_of(room, sender, content, sender_name),
        text=key,
        kind="button",
        action_id=event_id,
        message_ref=target,
        received_at=received_at,
        payload={"prompt_response": {"prompt_id": prompt.prompt_id, "option_id": option}},
        observes_labels=False,
    )
