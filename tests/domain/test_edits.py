"""Edits as the agent sees them: a waiting message takes its latest text, an edit of an answered
message says it is one, and nothing else in the batch changes (Hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatgate.domain.edits import EDIT_OF, fold_edits
from chatgate.domain.inbound import Inbound
from chatgate.domain.source import Source

SOURCE = Source(platform="slack", chat_id="D1", user_id="U1")


def msg(ref: str, text: str) -> Inbound:
    return Inbound(
        transport="slack", delivery_id=f"d-{ref}-{text}", source=SOURCE, text=text, message_ref=ref
    )


def edit(ref: str, text: str) -> Inbound:
    return Inbound(transport="slack", delivery_id=f"e-{ref}-{text}", source=SOURCE, text=text,
                   message_ref=ref, payload={EDIT_OF: ref})  # fmt: skip


def test_an_edit_of_a_waiting_message_updates_it_and_is_not_shown_on_its_own() -> None:
    folded = fold_edits([msg("1", "helo"), msg("2", "second"), edit("1", "hello"), edit("1", "hello!")])
    assert [m.text for m in folded] == ["hello!", "second"]
    assert [m.message_ref for m in folded] == ["1", "2"]


def test_an_edit_of_an_answered_message_is_shown_as_an_edit() -> None:
    folded = fold_edits([edit("0", "fixed"), msg("3", "next"), edit("0", "fixed again")])
    assert [m.text for m in folded] == ["(edited their message 0; it now reads:) fixed again", "next"]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 11), st.text(max_size=5)), max_size=12))
def test_every_waiting_message_appears_once_in_order_with_its_latest_text(
    events: list[tuple[bool, int, str]],
) -> None:
    batch = [
        edit(str(k), text) if is_edit else msg(str(n), text) for n, (is_edit, k, text) in enumerate(events)
    ]
    folded = fold_edits(batch)
    plain = [(n, m) for n, m in enumerate(batch) if EDIT_OF not in m.payload]
    shown = [m for m in folded if EDIT_OF not in m.payload]
    assert [m.delivery_id for m in shown] == [m.delivery_id for _, m in plain]
    for (n, original), seen in zip(plain, shown, strict=True):
        later = [m.text for m in batch[n + 1 :] if m.payload.get(EDIT_OF) == original.message_ref]
        assert seen.text == (later[-1] if later else original.text)
    assert all(m.text.startswith("(edited their message ") for m in folded if EDIT_OF in m.payload)
