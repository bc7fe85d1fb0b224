"""The Bolt app: Slack's request parsing, verification and dispatch, with acks left to us.

Bolt normally acknowledges an event before its listener runs. We build the app with
``process_before_response=True``, so Bolt answers (the Socket Mode ack, the HTTP
response) only with what the listener returns, after it returns. Each listener hands
its payload to the adapter, which returns ``200`` once the intake answered admitted,
duplicate or refused, and ``503`` when the event is not committed: Bolt's Socket Mode
glue sends no ack for a non-200 (Slack redelivers), and over HTTP Slack retries a 503.

Bolt still does what it is good at: parsing form and JSON bodies, the signing-secret
check and stale-timestamp refusal (HTTP), ``url_verification``, ``ssl_check``, the
bot's own messages ignored, and routing events, actions, commands and views.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped, warning_token_skipped
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

Handler = Callable[[str, dict[str, Any]], Awaitable[BoltResponse]]
"""(lane: "event" | "interactive" | "command", body) -> the response Bolt sends."""
Identity = Callable[[], AuthorizeResult]
"""Who the bot is, asked for every request Bolt authorizes."""
_ANY = re.compile(".*")


class _NotTheTokenWarning(logging.Filter):
    """Bolt warns at every start of a correct setup: that it took the client over
    ``SLACK_BOT_TOKEN`` (which the docs name), and that ``authorize`` replaces the client's
    token (which is the token ``authorize`` hands back)."""

    _EXPECTED = frozenset({warning_client_prioritized_and_token_skipped(), warning_token_skipped()})

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() not in self._EXPECTED


BOLT_LOG = logging.getLogger("chatgate.platforms.slack.bolt")
BOLT_LOG.addFilter(_NotTheTokenWarning())


def build_bolt_app(
    client: AsyncWebClient, handler: Handler, signing_secret: str | None, identity: Identity
) -> AsyncApp:
    """``signing_secret`` None: Socket Mode (requests arrive over our own authenticated socket).

    ``identity`` answers from the adapter's own ``auth.test``: Bolt's single-team default
    calls ``auth.test`` for every request until its first answer is cached, so a burst at a
    cold start made one call per event."""

    async def authorize() -> AuthorizeResult:  # Bolt passes the arguments a function names: none
        return identity()

    app = AsyncApp(
        client=client,
        authorize=authorize,
        process_before_response=True,
        signing_secret=signing_secret or "socket-mode",
        request_verification_enabled=signing_secret is not None,
        ignoring_self_events_enabled=True,
        logger=BOLT_LOG,
        name="chatgate",  # unnamed, Bolt names the app after its caller's file by inspect.stack()
    )

    async def on_event(body: dict[str, Any]) -> BoltResponse:
        return await handler("event", body)

    async def on_interactive(body: dict[str, Any]) -> BoltResponse:
        return await handler("interactive", body)

    async def on_command(body: dict[str, Any]) -> BoltResponse:
        return await handler("command", body)

    app.event(_ANY)(on_event)
    app.action(_ANY)(on_interactive)
    app.view(_ANY)(on_interactive)
    app.shortcut(_ANY)(on_interactive)
    app.options(_ANY)(on_interactive)
    app.command(_ANY)(on_command)
    return app
