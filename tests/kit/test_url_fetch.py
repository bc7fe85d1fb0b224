"""The URL fetcher's guard against server-side request forgery: which addresses are public,
which URLs are refused before any connection, and a real fetch from a local server (allowed
only when private addresses are)."""

from __future__ import annotations

import pytest

from chatgate.domain.media import MediaRefused
from chatgate.platforms.kit.url_fetch import fetch_url, is_public, parse_url
from support.file_server import file_server
from support.media_files import png


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # the cloud metadata address
        "100.64.0.1",  # shared address space
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "fc00::1",
        "fe80::1",
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "::ffff:10.0.0.1",
    ],
)
def test_private_local_and_special_addresses_are_not_public(address: str) -> None:
    assert not is_public(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_are_public(address: str) -> None:
    assert is_public(address)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("gopher://example.com/", "only http and https"),
        ("http:///nohost", "no host"),
        ("http://user:pw@example.com/x.png", "credentials"),
        ("http://example.com:99999/", "not valid"),
    ],
)
def test_urls_that_are_never_fetched(url: str, reason: str) -> None:
    with pytest.raises(MediaRefused, match=reason):
        parse_url(url)


async def _read(url: str, allow_private: bool) -> bytes:
    return b"".join([chunk async for chunk in fetch_url(url, allow_private)])


async def test_a_name_that_resolves_to_loopback_is_refused_before_connecting() -> None:
    with file_server() as (base, handler):
        port = base.rsplit(":", 1)[1]
        with pytest.raises(MediaRefused, match="private or local address"):
            await _read(f"http://localhost:{port}/shot.png", allow_private=False)
        assert handler.requests == []


async def test_a_local_server_is_fetched_when_allowed_following_a_redirect() -> None:
    image = png()
    with file_server() as (base, handler):
        handler.files["/shot.png"] = image
        assert await _read(f"{base}/moved", allow_private=True) == image
        with pytest.raises(MediaRefused, match="HTTP 404"):
            await _read(f"{base}/gone.png", allow_private=True)
        assert handler.requests == ["/moved", "/shot.png", "/gone.png"]
