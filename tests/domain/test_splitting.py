"""Splitting long replies: limits, exact rejoin, fence repair, grapheme integrity, break preference."""

from __future__ import annotations

import re
import unicodedata
from itertools import pairwise

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from chatgate.domain.outbound import LengthUnit
from chatgate.domain.splitting import join_parts, measure, split_text

UNITS: tuple[LengthUnit, ...] = ("chars", "utf16")
FAMILY = "👩\u200d👩\u200d👧\u200d👦"

# --- independent checkers (they restate the documented contract, not the implementation) ---

_MARKER = re.compile(r"\n(?:`{3,}|~{3,})\Z")
_FENCE_LINE = re.compile(r" {0,3}(`{3,}|~{3,})")


def contents(parts: list[str]) -> list[str]:
    """Each part without the markers split_text documents: closing "\\n```" and reopening first line."""
    out = []
    reopened = False
    for i, part in enumerate(parts):
        if reopened:
            first_line, sep, part = part.partition("\n")
            assert sep and _FENCE_LINE.match(first_line), f"part {i} lacks its reopening fence"
        reopened = False
        if i < len(parts) - 1 and (m := _MARKER.search(part)):
            part = part[: m.start()]
            reopened = True
        out.append(part)
    return out


def fence_lines(part: str) -> list[str]:
    return [line for line in part.split("\n") if _FENCE_LINE.match(line)]


def is_mark_like(ch: str) -> bool:
    """A code point that never starts a grapheme: combining mark, ZWJ, variation selector, modifier."""
    return (
        unicodedata.category(ch) in ("Mn", "Mc", "Me")
        or ch == "\u200d"
        or "\ufe00" <= ch <= "\ufe0f"
        or "\U0001f3fb" <= ch <= "\U0001f3ff"
    )


def is_ri(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"


def hangul_type(ch: str) -> str:
    cp = ord(ch)
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return "L"
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return "V"
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return "T"
    if 0xAC00 <= cp <= 0xD7A3:
        return "LV" if (cp - 0xAC00) % 28 == 0 else "LVT"
    return ""


_HANGUL_JOINS = {
    ("L", "L"), ("L", "V"), ("L", "LV"), ("L", "LVT"),
    ("LV", "V"), ("LV", "T"), ("V", "V"), ("V", "T"), ("LVT", "T"), ("T", "T"),
}  # fmt: skip


def assert_cut_keeps_graphemes(before: str, after: str) -> None:
    """The cut between two consecutive contents does not fall inside a grapheme cluster."""
    first, last = after[0], before[-1]
    assert not is_mark_like(first), f"part starts with {first!r}"
    assert last != "\u200d", "part ends with a ZWJ"
    assert not (last == "\r" and first == "\n"), "CRLF cut"
    assert (hangul_type(last), hangul_type(first)) not in _HANGUL_JOINS, "Hangul syllable cut"
    if is_ri(first):
        run = len(before) - len(before.rstrip("".join(chr(c) for c in range(0x1F1E6, 0x1F200))))
        assert run % 2 == 0, "a flag's regional indicator pair was cut"


def max_grapheme(text: str, unit: LengthUnit) -> int:
    return max((measure(g, unit) for g in regex.findall(r"\X", text)), default=0)


# --- strategies ---

words = st.sampled_from(["hello", "world", "chat", "gateway", "a", "I", "splitting", "ok.", "Yes!"])
spacing = st.sampled_from([" ", "  ", "\t", "\n", "\n\n", ". ", "! ", "\r\n", "\n \n"])
emoji = st.sampled_from(
    ["😀", "👍🏽", "👋🏿", FAMILY, "👨\u200d💻", "🏳️\u200d🌈", "🇫🇷", "🇯🇵🇺🇸", "1️⃣", "#️⃣", "❤️", "✌🏻"]
)
cjk = st.sampled_from(["漢字", "日本語のテキスト", "中文。", "한국어", "𠀀𠀁", "𝔘𝔫𝔦"])
combining = st.builds(
    lambda base, marks: base + "".join(marks),
    st.sampled_from("aeiouZ"),
    st.lists(st.sampled_from(["\u0301", "\u0308", "\u0323", "\u0300", "\u20dd"]), min_size=1, max_size=4),
)
jamo = st.sampled_from(["\u1100\u1161", "\u1100\u1161\u11a8", "\u1100\u1100\u1161\u1175", "가\u11a8"])
piece = st.one_of(words, spacing, emoji, cjk, combining, jamo)
inline = st.lists(piece, max_size=12).map("".join)
fenced = st.builds(
    lambda lang, body: f"\n```{lang}\n{body}\n```\n", st.sampled_from(["", "py", "python", "js"]), inline
)
texts = st.lists(st.one_of(piece, piece, piece, fenced), max_size=40).map("".join)
limits = st.integers(min_value=16, max_value=160)
units = st.sampled_from(UNITS)
# Stray fence characters anywhere: the text is not valid Markdown, but rejoining must stay exact.
nasty = st.lists(
    st.sampled_from(
        [
            "```",
            "``",
            "`",
            "~~~",
            "````",
            "```py",
            "`" * 12,
            "\n",
            " ",
            "x",
            "😀",
            "e\u0301",
            "~",
            "e" + "\u0301" * 12,
        ]
    ),
    max_size=60,
).map("".join)

PROPS = settings(max_examples=300, deadline=None)


# --- properties ---


@PROPS
@given(texts, limits, units)
def test_every_part_fits_the_limit_in_its_unit_and_none_is_empty(
    text: str, limit: int, unit: LengthUnit
) -> None:
    parts = split_text(text, limit, unit)
    for part in parts:
        assert part
        assert measure(part, unit) <= limit
        assert measure(part, "chars") <= limit  # utf16 units are never fewer than characters


@PROPS
@given(texts, limits, units)
def test_join_parts_gives_back_the_original_text(text: str, limit: int, unit: LengthUnit) -> None:
    parts = split_text(text, limit, unit)
    assert join_parts(parts) == text
    assert "".join(contents(parts)) == text
    if "```" not in text:
        assert "".join(parts) == text


@PROPS
@given(nasty, limits, units)
def test_join_parts_is_exact_even_with_stray_backticks_and_tildes(
    text: str, limit: int, unit: LengthUnit
) -> None:
    parts = split_text(text, limit, unit)
    assert all(0 < measure(p, unit) <= limit for p in parts)
    assert join_parts(parts) == text


@PROPS
@given(texts, limits, units)
def test_every_part_has_balanced_fences_when_fences_are_repairable(
    text: str, limit: int, unit: LengthUnit
) -> None:
    repairable = all(4 * measure(line + "\n", unit) <= limit for line in fence_lines(text))
    parts = split_text(text, limit, unit)
    if repairable:
        for part in parts:
            assert len(fence_lines(part)) % 2 == 0, part


@PROPS
@given(texts, limits, units)
def test_no_cut_falls_inside_a_grapheme_cluster(text: str, limit: int, unit: LengthUnit) -> None:
    parts = contents(split_text(text, limit, unit))
    if max_grapheme(text, unit) > limit // 2:
        return  # the documented last resort may cut such a grapheme; covered by an example below
    boundaries = {m.end() for m in regex.finditer(r"\X", text)}
    offset = 0
    for before, after in pairwise(parts):
        offset += len(before)
        assert offset in boundaries
        assert_cut_keeps_graphemes(before, after)


@PROPS
@given(texts, units)
def test_text_that_fits_is_returned_as_one_identical_part(text: str, unit: LengthUnit) -> None:
    limit = max(16, measure(text, unit))
    assert split_text(text, limit, unit) == ([text] if text else [])


# --- examples ---


def _prose(n_paragraphs: int) -> str:
    sentence = "The gateway keeps every message 👍🏽 and 漢字 safe. "
    paragraph = "\n".join(sentence * 4 for _ in range(5))
    return "\n\n".join(f"{i}: {paragraph} {FAMILY}" for i in range(n_paragraphs))


def test_ten_thousand_char_text_splits_into_ordered_parts_under_4096_utf16_units() -> None:
    text = _prose(60)[:10_000]
    assert len(text) == 10_000
    parts = split_text(text, 4096, "utf16")
    assert len(parts) >= 3
    assert all(measure(p, "utf16") <= 4096 for p in parts)
    assert all(measure(p, "utf16") >= 2048 for p in parts[:-1])
    assert "".join(parts) == text
    assert [text.index(p) for p in parts] == sorted(text.index(p) for p in parts)


def test_a_paragraph_break_is_preferred_over_later_line_and_word_breaks() -> None:
    first = "alpha beta. " * 30 + "\n\n"  # 362 chars
    second = ("gamma delta. " * 5 + "\n") * 10
    parts = split_text(first + second, 500)
    assert parts[0] == first
    assert "".join(parts) == first + second


def test_a_paragraph_break_before_half_the_limit_gives_way_to_a_later_line_break() -> None:
    text = "short.\n\n" + ("word " * 15 + "\n") * 10  # paragraph break at 8 of a 200 limit
    parts = split_text(text, 200)
    assert parts[0].endswith("\n") and not parts[0].endswith("\n\n")
    assert len(parts[0]) >= 100
    assert "".join(parts) == text


def test_sentence_end_then_whitespace_then_anywhere_are_the_next_preferences() -> None:
    sentences = "One two three. Four five six seven eight nine ten eleven twelve"
    parts = split_text(sentences, 40)
    assert parts[0] == "One two three. Four five six seven "  # no sentence end in the last half
    parts = split_text("Intro words here. And then a much longer tail of words", 30)
    assert parts[0] == "Intro words here. "
    parts = split_text("x" * 50, 16)
    assert parts == ["x" * 16, "x" * 16, "x" * 16, "xx"]


def test_whitespace_at_the_cut_stays_at_the_end_of_the_earlier_part() -> None:
    text = "lorem ipsum   " * 10
    parts = split_text(text, 30)
    assert parts[0].endswith("   ")
    assert not any(p.startswith(" ") for p in parts)
    assert "".join(parts) == text


def test_a_code_block_longer_than_the_limit_is_closed_and_reopened_with_its_language() -> None:
    code = "".join(f"print('line {i}')  # a comment\n" for i in range(40))
    text = "Here is the script:\n\n```python\n" + code + "```\n\nRun it with python3."
    parts = split_text(text, 200)
    assert len(parts) > 5
    assert parts[0].endswith("\n```")
    for part in parts[1:-1]:
        assert part.startswith("```python\n")
        assert part.endswith("\n```")
    assert parts[-1].startswith("```python\n")
    assert parts[-1].endswith("```\n\nRun it with python3.")
    assert all(len(fence_lines(p)) % 2 == 0 for p in parts)
    assert all(len(p) <= 200 for p in parts)
    assert join_parts(parts) == text


def test_a_block_the_text_leaves_open_stays_open_only_in_the_last_part() -> None:
    text = "```\n" + "line of code\n" * 20
    parts = split_text(text, 64)
    assert len(parts) > 2
    assert all(len(fence_lines(p)) % 2 == 0 for p in parts[:-1])
    assert len(fence_lines(parts[-1])) % 2 == 1
    assert join_parts(parts) == text


def test_a_fence_line_too_long_for_the_limit_is_not_repaired_but_still_rejoins() -> None:
    text = "```python\n" + "x = 1\n" * 10 + "```\n"  # 4 * len("```python\n") = 40 > 16
    parts = split_text(text, 16)
    assert not any(p.startswith("```python\n") for p in parts[1:])
    assert "".join(parts) == text
    assert join_parts(parts) == text


def test_utf16_budget_counts_an_astral_emoji_at_the_boundary_as_two_units() -> None:
    text = "a" * 4095 + "😀" + "tail"
    assert measure(text, "chars") == 4100 and measure(text, "utf16") == 4101
    parts = split_text(text, 4096, "utf16")
    assert parts == ["a" * 4095, "😀tail"]
    assert split_text(text, 4096, "chars") == ["a" * 4095 + "😀", "tail"]


def test_an_emoji_zwj_sequence_at_the_boundary_moves_whole_to_the_next_part() -> None:
    text = "b" * 4090 + FAMILY + "end"  # family = 7 chars, 11 utf16 units
    parts = split_text(text, 4096, "utf16")
    assert parts == ["b" * 4090, FAMILY + "end"]
    parts = split_text(text, 4096, "chars")
    assert parts == ["b" * 4090, FAMILY + "end"]


@pytest.mark.parametrize(
    "cluster", ["🇫🇷", "👍🏽", "1️⃣", "e\u0301\u0323", "\u1100\u1161\u11a8", "🏳️\u200d🌈", "\r\n"]
)
def test_a_cluster_straddling_the_limit_is_never_cut(cluster: str) -> None:
    for pad in range(16 - measure(cluster, "utf16"), 17):
        text = "z" * pad + cluster + "z" * 20
        for part in contents(split_text(text, 16, "utf16")):
            assert cluster in part or not set(part) & set(cluster), (pad, part)


def test_a_grapheme_longer_than_the_limit_is_cut_between_code_points_as_a_last_resort() -> None:
    text = "e" + "\u0301" * 100 + " done"
    parts = split_text(text, 16)
    assert all(len(p) <= 16 for p in parts)
    assert "".join(parts) == text


def test_a_fence_like_line_longer_than_the_limit_is_cut_and_still_rejoins_exactly() -> None:
    texts = [
        "x\n" + "`" * 100,
        "```\n" + "`" * 50 + "\nmore\n```",
        "intro\n~~~" + "~" * 60,
        "````\n```````` ```x\n````",  # a cut inside the closing line must not look like a marker
    ]
    for text in texts:
        for limit in (16, 17, 22, 23):
            parts = split_text(text, limit)
            assert all(0 < len(p) <= limit for p in parts)
            assert join_parts(parts) == text


def test_empty_text_gives_no_parts() -> None:
    assert split_text("", 16) == []
    assert join_parts([]) == ""


def test_a_limit_below_16_or_an_unknown_unit_is_rejected() -> None:
    with pytest.raises(ValueError):
        split_text("hello", 15)
    with pytest.raises(ValueError):
        split_text("hello", 100, "bytes")  # type: ignore[arg-type]


def test_measure_counts_code_points_or_utf16_units() -> None:
    assert measure("a😀é", "chars") == 3
    assert measure("a😀é", "utf16") == 4
    assert measure(FAMILY, "utf16") == 11
