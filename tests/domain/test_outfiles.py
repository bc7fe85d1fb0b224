"""File rows: a file the platform takes is a row naming its blob; one it cannot take is a line
saying why, so the chat reads a clear refusal instead of nothing."""

from __future__ import annotations

from chatgate.domain.outfiles import FILE_KEY, OutFile, file_drafts
from chatgate.domain.source import Source

SOURCE = Source(platform="telegram", chat_id="42", chat_type="dm", user_id="42")


def test_each_file_is_a_row_after_the_reply_keyed_by_its_message_and_place() -> None:
    files = [
        OutFile("a" * 64, "chart.png", "image/png", 1000, "the chart"),
        OutFile("b" * 64, "r.pdf", "application/pdf", 20, ""),
    ]
    rows = file_drafts(SOURCE, "k", 7, files, "99", 50_000_000)
    assert [r.idem_key for r in rows] == ["file:7:0", "file:7:1"]
    assert [OutFile.from_target(r.target, r.text) for r in rows] == files
    assert rows[0].text == "the chart" and rows[0].in_reply_to == "99" and rows[0].kind == "final"


def test_a_file_over_the_platform_limit_or_without_uploads_is_a_refusal_line() -> None:
    big = OutFile("c" * 64, "video.mp4", "video/mp4", 60_000_000)
    (over,) = file_drafts(SOURCE, "k", 1, [big], None, 50_000_000)
    assert FILE_KEY not in over.target
    said = "it is larger than the 50.0 MB Telegram takes from a bot"
    assert over.text == f"[file video.mp4 (60.0 MB) could not be sent: {said}]"
    (none,) = file_drafts(SOURCE, "k", 1, [big], None, 0)
    assert FILE_KEY not in none.target and "does not take files" in none.text


def test_a_malformed_file_target_is_no_file() -> None:
    assert OutFile.from_target({FILE_KEY: {"sha": "x", "name": "n", "mime": "m", "size": "1"}}) is None
    assert OutFile.from_target({}) is None
