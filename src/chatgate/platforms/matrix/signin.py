"""Signing the bot in: the access token (or a password login on a fixed device), whose account
it is (``whoami``), its display name (a ``Name:`` mention), and this store's transaction-id
namespace. Run by the adapter before its first call, and again until it succeeds, so a
homeserver that is down when the gateway starts delays Matrix, not the gateway."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import msgspec

from chatgate.domain.errors import PlatformCallError
from chatgate.domain.store_roles import Cursors
from chatgate.platforms.matrix.section import MatrixSection

if TYPE_CHECKING:
    from chatgate.platforms.matrix.api import MatrixApi


class SignedIn(msgspec.Struct, frozen=True):
    user_id: str
    display_name: str | None
    namespace: str
    """Outbox rows' transaction ids start with it (``outbound.row_transaction``)."""


async def sign_in(api: MatrixApi, section: MatrixSection, secret: str, cursors: Cursors) -> SignedIn:
    from chatgate.platforms.matrix.api import path  # aiohttp: loaded once the adapter starts

    if section.password_env:
        api.token = await _login(api, section, secret)
    else:
        api.token = secret
    me = (await api.call("GET", path("account", "whoami"))).get("user_id")
    if not isinstance(me, str):
        raise PlatformCallError("whoami: the homeserver answered without a user_id")
    if section.user_id and me != section.user_id:
        raise PlatformCallError(
            f"the access token belongs to {me}, not platforms.matrix.user_id {section.user_id}"
        )
    try:
        name = (await api.call("GET", path("profile", me, "displayname"))).get("displayname")
    except PlatformCallError:
        name = None
    shown = name.strip() if isinstance(name, str) and name.strip() else None
    return SignedIn(me, shown, await _namespace(cursors, me))


async def _login(api: MatrixApi, section: MatrixSection, password: str) -> str:
    from chatgate.platforms.matrix.api import path  # (idem)

    body = {
        "type": "m.login.password",
        "identifier": {"type": "m.id.user", "user": section.user_id},
        "password": password,
        "device_id": section.device_id,
        "initial_device_display_name": "chatgate",
    }
    token = (await api.call("POST", path("login"), body)).get("access_token")
    if not isinstance(token, str):
        raise PlatformCallError("login: the homeserver answered without an access token")
    return token


async def _namespace(cursors: Cursors, user_id: str) -> str:
    """A random name kept in this store: outbox rows' transaction ids are unique per store, so a
    new state directory never reuses an old one's (the homeserver would drop that send)."""
    name = f"matrix:{user_id}:txn"
    found = await cursors.get_cursor(name)
    if found:
        return found
    created = f"cg{secrets.token_hex(6)}"
    await cursors.set_cursor(name, created)
    return created
