"""``chatgate doctor``'s live check of the relay: dial, sign in, say hello, wait for the descriptors.

One short connection, closed at once: it proves the URL, the gateway id and the secret, and
that the connector fronts each configured platform. The command is blocking (no event loop of
its own), so the probe runs its own loop with ``asyncio.run``.
"""

from __future__ import annotations

import asyncio

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from chatgate.platforms.kit.init import CheckFailed
from chatgate.platforms.relay.auth import make_upgrade_token
from chatgate.platforms.relay.connection import UNAUTHORIZED, dial_url
from chatgate.platforms.relay.frames import DescriptorFrame, HelloFrame
from chatgate.platforms.relay.section import RelaySection
from chatgate.platforms.relay.wire import MAX_FRAME_BYTES, FrameSplitter, encode, parse_frame

REFUSED = "the connector refused this gateway id or secret"


async def _hello(section: RelaySection, secret: str) -> str:
    assert section.url and section.gateway_id  # the plugin's check refused the config otherwise
    url = dial_url(section.url)
    token = make_upgrade_token(section.gateway_id, secret, section.token_ttl_seconds)
    wanted = {p.name for p in section.platforms}
    seen: set[str] = set()
    async with asyncio.timeout(section.handshake_timeout_seconds):
        async with connect(
            url,
            additional_headers={"Authorization": f"Bearer {token}"},
            max_size=MAX_FRAME_BYTES * 4,
            close_timeout=2,
            proxy=None,
        ) as ws:
            for p in section.platforms:
                await ws.send(encode(HelloFrame(platform=p.name, botId=p.bot_id)))
            splitter = FrameSplitter()
            async for message in ws:
                for line in splitter.feed(message):
                    frame = parse_frame(line) if isinstance(line, str) else None
                    if isinstance(frame, DescriptorFrame):
                        seen.add(frame.descriptor.platform)
                if wanted <= seen:
                    return f"the connector at {url} answered hello for {', '.join(sorted(wanted))}"
    raise CheckFailed(f"the connector closed before answering hello for {', '.join(sorted(wanted - seen))}")


def hello(section: RelaySection, secret: str) -> str:
    """What the connector answered; ``CheckFailed`` says why it did not."""
    try:
        return asyncio.run(_hello(section, secret))
    except InvalidStatus as exc:
        status = exc.response.status_code
        raise CheckFailed(
            f"{REFUSED} (HTTP {status})" if status in (401, 403) else f"HTTP {status}"
        ) from None
    except ConnectionClosed as exc:
        code = exc.rcvd.code if exc.rcvd else None
        if code == UNAUTHORIZED:
            raise CheckFailed(f"{REFUSED} (close {code})") from None
        raise CheckFailed(f"the connector closed the connection ({code})") from None
    except TimeoutError:
        raise CheckFailed(
            f"no answer to hello within {section.handshake_timeout_seconds:g} s; is the URL right?"
        ) from None
    except (OSError, InvalidHandshake, InvalidURI) as exc:
        raise CheckFailed(f"cannot connect to {section.url}: {exc}") from None
