"""The checks an HTTP Events request passes before Bolt sees it: Slack's signature, then the body.

Bolt verifies the signature and parses the body itself, but it trusts both to be well
formed: ``int()`` of a non-numeric ``X-Slack-Request-Timestamp``, ``bytes.decode`` of bad
UTF-8, ``json.loads`` of a body nested 100,000 deep, or a ``payload`` that is a list each
raised out of it as a 500 with an ERROR traceback (issue 27, finding 10). Here every one
of those is a client fault with a code and a short reason: the signature first (over the
raw bytes, in constant time, within Slack's five-minute window), then the body exactly as
Bolt will parse it (``slack_bolt.request.internals.parse_body``), within a depth bound.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

import msgspec

from chatgate.domain import bounded_json
from chatgate.domain.bounded_json import BadJson
from chatgate.domain.log_budget import LogBudget
from chatgate.platforms.kit.bodies import bounded_body
from chatgate.platforms.kit.trust import vouch

if TYPE_CHECKING:
    from slack_bolt.async_app import AsyncApp
    from starlette.requests import Request
    from starlette.responses import Response

MAX_HTTP_BODY = 1024 * 1024
"""Largest HTTP event body read (Slack's are a few KiB; a modal with many inputs stays far below)."""

WINDOW_SECONDS = 300
"""Slack's own rule: a request signed more than five minutes from now is refused."""


class Refusal(msgspec.Struct, frozen=True):
    status: int
    code: str
    reason: str


def signature_problem(
    secret: str, headers: Mapping[str, str], body: bytes, now: float | None = None
) -> Refusal | None:
    """Whether the request is signed with ``secret`` as Slack signs: ``v0:<timestamp>:<body>``."""
    stamp = headers.get("x-slack-request-timestamp", "")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        return Refusal(401, "bad_timestamp", "X-Slack-Request-Timestamp is not a Unix time in seconds")
    if abs((time.time() if now is None else now) - int(stamp)) > WINDOW_SECONDS:
        return Refusal(401, "stale_timestamp", "X-Slack-Request-Timestamp is more than 5 minutes off")
    expected = "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()
    sent = headers.get("x-slack-signature", "")
    if not hmac.compare_digest(sent.encode("utf-8", "replace"), expected.encode()):
        return Refusal(401, "bad_signature", "X-Slack-Signature does not match the signing secret")
    return None


def body_problem(content_type: str | None, body: bytes) -> Refusal | None:
    """Whether Bolt can parse ``body``: UTF-8, and JSON or a form whose ``payload`` is a JSON object.

    Mirrors ``parse_body``: JSON when the content type says so or the body starts with ``{``;
    otherwise a form, whose ``payload`` field (if the body mentions one) is JSON."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(400, "invalid_body", f"the body is not UTF-8 (byte {exc.start})")
    if not text:
        return None
    try:
        if content_type == "application/json" or text.startswith("{"):
            parsed = bounded_json.parse(text)
        elif "payload" in text:
            payload = dict(parse_qsl(text, keep_blank_values=True)).get("payload")
            parsed = {} if payload is None else bounded_json.parse(payload)
        else:
            return None  # a slash command's form: fields of text, nothing nested
    except BadJson as exc:
        return Refusal(400, "invalid_body", f"the body is not usable JSON: {exc.reason}")
    if not isinstance(parsed, dict):
        return Refusal(400, "invalid_body", "the body (or its payload) must be a JSON object")
    return None


async def serve_http(app: AsyncApp, secret: str, request: Request, lines: LogBudget) -> Response:
    """One request to ``/slack/events``: read within its bound, checked, then Bolt's to dispatch."""
    from slack_bolt.adapter.starlette.async_handler import to_async_bolt_request, to_starlette_response

    body = await bounded_body(request, MAX_HTTP_BODY)
    if body is None:
        return _refuse(Refusal(413, "too_large", f"the body is over {MAX_HTTP_BODY} bytes"), lines)
    content_type = (request.headers.get("content-type") or "").split(";")[0] or None
    refusal = signature_problem(secret, request.headers, body) or body_problem(content_type, body)
    if refusal is not None:
        return _refuse(refusal, lines)
    vouch(request)  # signed by Slack: its connection is no stranger's
    try:
        bolt_request = to_async_bolt_request(request, body)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:  # Bolt's context
        return _refuse(Refusal(400, "invalid_body", f"Bolt cannot read it ({type(exc).__name__})"), lines)
    return to_starlette_response(await app.async_dispatch(bolt_request))


def _refuse(refusal: Refusal, lines: LogBudget) -> Response:
    """A client fault: its status and one short line, within the log budget (strangers send these)."""
    from starlette.responses import PlainTextResponse

    lines.warning(
        f"slack http: {refusal.code}",
        "Slack HTTP request refused (%d %s): %s",
        refusal.status,
        refusal.code,
        refusal.reason,
        extra={"platform": "slack", "code": refusal.code},
    )
    return PlainTextResponse(refusal.reason, status_code=refusal.status)
