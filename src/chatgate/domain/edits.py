"""Edits of messages the gateway already admitted, as the agent sees them.

An adapter admits a platform's edit of a message as an ``Inbound`` of its own (its own
delivery id, the edited message's ``message_ref``) with ``payload["edit_of"]`` naming the
edited message. When a turn takes up its messages, an edit of a message in the same
batch (one still waiting, not answered yet) replaces that message's text and is not
shown on its own; an edit of a message answered before is shown to the agent as an edit
("edited their message …"), never as a message of its own. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from chatgate.domain.inbound import Inbound

EDIT_OF = "edit_of"
"""``Inbound.payload`` key: the ``message_ref`` of the message this event edits."""


def edit_target(inbound: Inbound) -> str | None:
    target = inbound.payload.get(EDIT_OF) if inbound.payload else None
    return target if isinstance(target, str) and target else None


def fold_edits(messages: Sequence[Inbound]) -> list[Inbound]:
    """The batch as the agent should read it: waiting messages carry their latest text, and
    an edit of a message outside the batch says that it is one."""
    folded: list[Inbound] = []
    by_ref: dict[str, int] = {}
    outside: set[int] = set()
    """Positions holding an edit of a message outside the batch (later edits of it fold in too)."""
    for message in messages:
        target = edit_target(message)
        if target is not None and target in by_ref:
            at = by_ref[target]
            text = _as_edit(target, message.text) if at in outside else message.text
            folded[at] = replace(folded[at], text=text)
            continue
        if target is not None:
            outside.add(len(folded))
            by_ref[target] = len(folded)
            message = replace(message, text=_as_edit(target, message.text))
        elif message.message_ref:
            by_ref[message.message_ref] = len(folded)
        folded.append(message)
    return folded


def _as_edit(target: str, text: str) -> str:
    return f"(edited their message {target}; it now reads:) {text}"
