"""Webhooks in: the secret checks and the prompt template, as pure functions.

The template is ``string.Template`` over a flattened copy of the JSON body: ``${a.b}`` is
the field ``b`` of the object ``a``, ``${items.0}`` the first element of a list, ``$body``
the whole body as JSON, ``$route`` the route's name. Nothing is evaluated; a field that is
not there renders as nothing, and the body is bounded before it is parsed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import string
from collections.abc import Mapping
from typing import Any

from chatgate.domain.inbound import MAX_TEXT_CHARS

MAX_DEPTH = 8
MAX_FIELDS = 2000
MAX_DELIVERY_ID = 200
"""Longest delivery id a sender may name (it is stored with every event)."""


class HookTemplate(string.Template):
    """``$name`` / ``${dotted.path}``: a field of the body (dots and digits allowed in braces)."""

    braceidpattern = r"[_a-zA-Z0-9][_a-zA-Z0-9.-]*"


def signed_message(timestamp: str, delivery: str, body: bytes) -> bytes:
    """What an ``hmac`` route's signature covers: ``<timestamp>.<delivery id>.<body>``.

    The timestamp bounds how long a captured delivery stays usable, and the delivery id
    is signed so that the same body cannot be replayed under a new id (each id is run once)."""
    return f"{timestamp}.{delivery}.".encode() + body


def hmac_valid(secret: bytes, message: bytes, signature: str | None, prefix: str) -> bool:
    """Whether ``signature`` is ``prefix`` + the hex SHA-256 HMAC of ``message`` (constant time)."""
    if not signature or not signature.startswith(prefix):
        return False
    expected = hmac.new(secret, message, hashlib.sha256).hexdigest()
    return hmac.compare_digest(signature[len(prefix) :].strip().lower().encode(), expected.encode())


def timestamp_of(value: str | None) -> int | None:
    """A delivery's ``<timestamp>`` header as Unix seconds: digits only (at most 12), else None."""
    value = (value or "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 12:
        return None
    return int(value)


def bearer_valid(secret: bytes, authorization: str | None) -> bool:
    """Whether the ``Authorization`` header is ``Bearer <secret>`` (constant time)."""
    if not authorization:
        return False
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), secret)


def flatten(
    value: Any, prefix: str = "", depth: int = 0, out: dict[str, str] | None = None
) -> dict[str, str]:
    """Every field of a JSON value by its dotted path (objects and lists both), as text."""
    fields: dict[str, str] = {} if out is None else out
    if len(fields) >= MAX_FIELDS:
        return fields
    if prefix:
        fields[prefix] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if depth >= MAX_DEPTH:
        return fields
    children: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        children = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        children = [(str(i), v) for i, v in enumerate(value)]
    for key, child in children:
        flatten(child, f"{prefix}.{key}" if prefix else key, depth + 1, fields)
    return fields


def render_prompt(template: str, route: str, body: Any) -> str:
    """The agent's input for one delivery, at most ``MAX_TEXT_CHARS`` characters."""
    fields = {k: v for k, v in flatten(body).items()}
    fields["route"] = route
    fields["body"] = json.dumps(body, ensure_ascii=False)
    text = HookTemplate(template).safe_substitute(_Blank(fields))
    if len(text) > MAX_TEXT_CHARS:
        text = text[: MAX_TEXT_CHARS - 20] + " ... (truncated)"
    return text


class _Blank(dict[str, str]):
    """A field the body does not have renders as nothing (never as the raw ``${...}``)."""

    def __missing__(self, key: str) -> str:
        return ""
