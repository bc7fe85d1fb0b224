"""What a Telegram chat shows: long replies in ordered parts, Markdown as HTML, plain text as a fallback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telegram_double import (
    BotApiDouble,
    EntityError,
    Gateways,
    User,
    echo_of,
    private,
    telegram_config,
    utf16_len,
    visible_text,
)

from chatgate.domain.outbound import PREVIEW_CURSOR
from chatgate.platforms.telegram.render import markdown_to_html

ADA = User(6001, "Ada")
BOB = User(6002, "Bob")
MARKER = "BROKEN-ENTITIES"


@pytest.fixture
async def double() -> AsyncIterator[BotApiDouble]:
    server = BotApiDouble(parse_fail_marker=MARKER)
    await server.start()
    yield server
    await server.stop()


def _long_text() -> str:
    """~10,000 characters, with emoji (2 UTF-16 units each) so UTF-16 and character counts differ."""
    paragraph = "Telegram counts 4096 UTF-16 units 🚀🎉, not characters. " * 6
    text = ""
    n = 0
    while len(text) < 9_994:
        text += f"{n}: {paragraph}\n\n"
        n += 1
    return text[:9_994]


async def test_a_10000_character_reply_arrives_as_ordered_parts_within_4096_utf16_units(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    # Slow enough streaming that a preview is sent and edited, so the first part is that preview, edited.
    config = telegram_config(
        double,
        tmp_path,
        telegram={"allow_users": [ADA.id]},
        agent={"echo": {"chunk_delay_ms": 120, "chunk_chars": 400}},
    )
    await gateways.start(config)
    text = _long_text()
    _, message_id = await double.push_message(private(ADA), ADA, text)
    reply = echo_of(text)
    assert len(reply) == 10_000 and utf16_len(reply) > 10_000

    def complete() -> bool:
        return "".join(m.text for m in double.view(ADA.id)) == reply

    await double.wait_for(complete, timeout=60, what="the whole reply shown")
    parts = double.view(ADA.id)
    assert len(parts) == 3
    assert all(utf16_len(p.text) <= 4096 for p in parts), [utf16_len(p.text) for p in parts]
    assert all(p.reply_to == message_id for p in parts)
    assert parts[0].edits >= 1, "the streamed preview was not turned into the first part"
    assert not any(PREVIEW_CURSOR in p.text for p in parts)
    assert not [m for rows in double.sent.values() for m in rows.values() if m.deleted]


async def test_markdown_is_shown_formatted_and_a_refused_rendering_arrives_as_plain_text(
    double: BotApiDouble, gateways: Gateways, tmp_path: Path
) -> None:
    await gateways.start(telegram_config(double, tmp_path, telegram={"allow_users": [ADA.id, BOB.id]}))
    await double.push_message(private(ADA), ADA, "**bold** and `x < y` & _it_")
    broken = f"{MARKER} **unbalanced* <b> & stuff"
    await double.push_message(private(BOB), BOB, broken)
    await double.wait_for(lambda: len(double.view(ADA.id)) == 1 and len(double.view(BOB.id)) == 1)

    (formatted,), (plain,) = double.view(ADA.id), double.view(BOB.id)
    assert formatted.parse_mode == "HTML"
    assert formatted.text == "echo: bold and x < y & it"
    assert "<b>bold</b>" in formatted.raw and "<code>x &lt; y</code>" in formatted.raw
    assert plain.parse_mode is None, "the retry after 'can't parse entities' still used HTML"
    assert plain.text == echo_of(broken), "the plain-text fallback changed the text"
    refused = [c for c in double.calls if c[0] == "sendMessage" and MARKER in c[1]["text"]]
    assert [c[1].get("parse_mode") for c in refused] == ["HTML", None]


TOKENS = [*"ab _*~`#[]()<>&\"'\n:/.h🙂", "http://x.y/", "```py\n", "**", "__", "\n```\n"]
MARKDOWNISH = st.lists(st.sampled_from(TOKENS), max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(MARKDOWNISH)
def test_rendered_markdown_is_always_accepted_by_telegrams_html_parser_and_never_longer(text: str) -> None:
    rendered = markdown_to_html(text)
    try:
        shown = visible_text(rendered, "HTML")
    except EntityError as exc:  # pragma: no cover - the failure message is the point
        raise AssertionError(f"{text!r} -> {rendered!r}: {exc}") from exc
    assert utf16_len(shown) <= utf16_len(text)


@given(st.text(alphabet=st.characters(blacklist_characters="*_~`[#<>&\r", blacklist_categories=["Cs"])))
def test_text_without_markdown_is_shown_exactly_as_written(text: str) -> None:
    assert visible_text(markdown_to_html(text), "HTML") == text


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("**b** *i* _i_ ~~s~~ `c`", "<b>b</b> <i>i</i> <i>i</i> <s>s</s> <code>c</code>"),
        ("snake_case_name and 2 * 3 * 4", "snake_case_name and 2 * 3 * 4"),
        (
            "```python\nif a < b:\n    pass\n```",
            '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>',
        ),
        ("[docs](https://x.org/?a=1&b=2)", '<a href="https://x.org/?a=1&amp;b=2">docs</a>'),
        ("[evil](javascript:alert(1))", "[evil](javascript:alert(1))"),
        ("# Title", "<b>Title</b>"),
        ("**unclosed", "**unclosed"),
        ("```\nan open fence runs to the end", "<pre>an open fence runs to the end</pre>"),
        # Plain text between constructs is escaped as a run: each construct still starts where it does.
        ("x`a`y *b*", "x<code>a</code>y <i>b</i>"),
        ("*a [b](http://c) d*", '<i>a <a href="http://c">b</a> d</i>'),
        ("*a `b* c` d*", "<i>a <code>b* c</code> d</i>"),
        ("**a `b** c`", "**a <code>b** c</code>"),
        ("snake_case_`x`_", "snake_case_<code>x</code>_"),
        (
            "a & `<b>` & [<](http://x?a=1&b=2)",
            'a &amp; <code>&lt;b&gt;</code> &amp; <a href="http://x?a=1&amp;b=2">&lt;</a>',
        ),
    ],
)
def test_markdown_constructs_render_to_telegram_html(markdown: str, html: str) -> None:
    assert markdown_to_html(markdown) == html
