"""The media rules: names never become paths, types come from content, limits per platform."""

from __future__ import annotations

from chatgate.domain.media import MediaItem, MediaLimits, classify, human_size, sanitize_name, sniff
from support.media_files import pdf, png


def test_a_name_never_reaches_a_path() -> None:
    assert sanitize_name("../../etc/passwd") == "passwd"
    assert sanitize_name("..\\..\\boot.ini") == "boot.ini"
    assert sanitize_name("/abs/report.pdf") == "report.pdf"
    assert sanitize_name("..") == "file"
    assert sanitize_name(".bashrc") == "bashrc"
    assert sanitize_name("a\x00b\nc.txt") == "abc.txt"
    assert sanitize_name(None, "photo.jpg") == "photo.jpg"
    assert sanitize_name("x" * 300 + ".png").endswith(".png")
    assert len(sanitize_name("x" * 300 + ".png")) <= 120
    assert sanitize_name("résumé (final).pdf") == "résumé (final).pdf"


def test_the_type_comes_from_the_content_not_the_name() -> None:
    assert sniff(png()) == "image/png"
    assert sniff(pdf("hello")) == "application/pdf"
    assert sniff(b"\xff\xd8\xff\xe0\x00\x10JFIF") == "image/jpeg"
    assert sniff("plain words, ünïcode".encode()) == "text/plain"
    assert sniff(b'<?xml version="1.0"?><svg onload="alert(1)"/>') == "image/svg+xml"
    assert sniff(b"\x00\x01\x02\x03binary") == "application/octet-stream"
    assert sniff(b"OggS\x00\x02") == "audio/ogg"


def test_svg_is_never_an_image() -> None:
    assert classify("image/svg+xml") == "other"
    assert classify("image/png") == "image"
    assert classify("application/json") == "text"


def test_a_platform_limit_is_never_above_the_overall_one() -> None:
    limits = MediaLimits(max_bytes=1000, platform_max_bytes={"telegram": 500, "discord": 5000})
    assert limits.bytes_for("telegram") == 500
    assert limits.bytes_for("discord") == 1000
    assert limits.bytes_for("webchat") == 1000


def test_sizes_read_as_people_read_them() -> None:
    assert human_size(999) == "999 B"
    assert human_size(1234) == "1.2 kB"
    assert human_size(20_000_000) == "20.0 MB"
    assert MediaItem("a" * 64, "image/png", 1234, "photo.png").label() == "photo.png (image/png, 1.2 kB)"
