"""``platforms.api``: the keys of the OpenAI-compatible API's section (docs/api.md)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from chatgate.platforms.kit.section import EnvName, PlatformSection, Section

ClientSystem = Literal["append", "replace", "ignore"]


class ApiKeyPolicy(Section, kw_only=True):
    """What one key's requests get instead of the section's defaults (``platforms.api.keys``)."""

    system_prompt: Annotated[str, msgspec.Meta(max_length=100_000)] | None = None
    """This key's persona, in place of the gateway's (``agent.system_prompt``)."""
    client_system: ClientSystem | None = None
    """This key's rule for the client's system/developer messages (default: the section's)."""


class ApiSection(PlatformSection, kw_only=True):
    """The OpenAI-compatible API (``/v1/...``) on the gateway's HTTP server (docs/api.md)."""

    model: Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:/-]+\Z")] = (
        "chatgate"
    )
    """The model name clients ask for (``GET /v1/models`` lists it); any other name is a 400."""
    key_storage: Literal["store", "env"] = "store"
    """``store``: keys made with ``chatgate api-key create`` (hashed in the database);
    ``env``: the one key in ``key_env`` (for a deployment without a shell)."""
    key_env: EnvName | None = None
    """With ``key_storage: env``: the environment variable that holds the accepted key."""
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    """Longest request body read; a longer one is answered 400 (body_too_large) without reading the rest."""
    wait_seconds: Annotated[float, msgspec.Meta(gt=0)] = 600.0
    """How long a request waits for its answer before a 504 (the turn keeps running: fetch it with
    ``GET /v1/responses/{id}`` or retry with the same ``Idempotency-Key``)."""
    max_waiting: Annotated[int, msgspec.Meta(ge=1)] = 256
    """Requests waiting for an answer at once (each holds a connection); beyond it, 429."""
    client_system: ClientSystem = "append"
    """The client's system/developer messages (``instructions`` on responses): ``append`` them
    after the persona, ``replace`` the persona with them, or ``ignore`` them."""
    allow_private_urls: bool = False
    """Fetch an ``image_url`` / ``file_url`` whose host is a private, loopback or link-local
    address. Off: such a URL is a 400 (a client must not make the gateway read its own network)."""
    keys: dict[str, ApiKeyPolicy] = {}
    """Per key id (``chatgate api-key list``): a persona and a rule of its own."""
