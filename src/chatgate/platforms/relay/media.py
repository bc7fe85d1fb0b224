"""A relayed attachment's bytes, as the connector contract carries them: a URL or inline.

An inbound event names its files in ``media_urls`` (with ``media[]`` metadata). An http(s)
URL (a platform's CDN link the connector passed on) is fetched by ``kit.url_fetch``: the
connector chose it, but from what a stranger sent, so only public addresses unless
``platforms.relay.allow_private_urls`` (fail closed). A ``data:`` URL carries the bytes
inline (base64), for a connector whose platform's files need its own credentials: it
downloads them and sends the bytes. Either way the engine's fetch step bounds, checks and
stores what comes out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from chatgate.domain.media import MediaRefused
from chatgate.platforms.kit.inline import NotBase64, data_url, decode_base64, slices
from chatgate.platforms.kit.url_fetch import fetch_url


async def open_media(ref: str, platform: str, allow_private: bool) -> AsyncIterator[bytes]:
    """The bytes ``ref`` (a ``media_urls`` entry) names; ``MediaRefused`` saying why not."""
    if ref.startswith("data:"):
        parsed = data_url(ref)
        if parsed is None or not parsed[1]:
            raise MediaRefused("the relay sent a data: URL that is not base64")
        try:
            data = await decode_base64(parsed[1])
        except NotBase64 as exc:
            raise MediaRefused(f"the relay sent the file inline, but {exc}") from None
        async for chunk in slices(data):
            yield chunk
        return
    async for chunk in fetch_url(ref, allow_private, f"the {platform} file host"):
        yield chunk
