"""The fake Discord: the gateway and the REST routes the adapter uses, on one 127.0.0.1 port.

discord.py runs unmodified against it (``api_base`` points its ``Route.BASE`` here, and
``GET /gateway/bot`` names this server's WebSocket). Tests drive it from Python (``post``,
``interact``, ``create_thread``, ``drop``, ``rate_limit``) and read ``calls`` (every REST call
with its status) and ``view`` (what a channel shows).

Rate limits as Discord sends them: a 429 with ``retry_after`` in the body and the headers,
``X-RateLimit-Scope`` (``user`` for a route bucket, ``global``), and ``Via`` (without it
discord.py takes a 429 for a proxy's ban). ``rate_limit`` answers the next N calls of a route
with 429; ``channel_budget`` enforces Discord's 5 messages per 5 s per channel and counts each
call over it in ``violations``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from discord_fake.gateway import Gateway
from discord_fake.state import (
    APP_ID,
    BOT,
    BOT_ID,
    DM,
    GUILD_TEXT,
    TOKEN,
    Call,
    Channel,
    Guild,
    Message,
    User,
    snowflake,
)

API = "/api/v10"
Handler = Callable[[web.Request], Any]


def reply(status: int, body: Any = None, headers: dict[str, str] | None = None) -> web.Response:
    if body is None:
        return web.Response(status=status, headers=headers)
    # discord.py reads JSON only when the content type is exactly application/json.
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


@dataclass
class Limit:
    times: int
    retry_after: float
    scope: str


class FakeDiscord:
    def __init__(self) -> None:
        self.guilds: dict[str, Guild] = {}
        self.channels: dict[str, Channel] = {}
        self.messages: dict[str, list[Message]] = {}
        self.calls: list[Call] = []
        self.reactions: dict[str, set[str]] = {}
        """The bot's reactions now showing, per message id."""
        self.gateway = Gateway(self)
        self.refuse_resume = False
        self.limits: dict[str, Limit] = {}
        self.channel_budget: tuple[int, float] | None = None
        self.violations: list[Call] = []
        self.commands: dict[str, list[dict[str, Any]]] = {}
        self.interaction_responses: dict[str, list[dict[str, Any]]] = {}
        self.tokens: dict[str, str] = {}
        """interaction token -> channel id; a token not here is expired (or never issued)."""
        self.fail_sends = 0
        self.history_delay = 0.0
        """Seconds a history read takes (a slow catch-up)."""
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.files: dict[str, bytes] = {}
        self.uploaded: list[tuple[str, str, bytes]] = []
        """Every file a create-message upload carried (name, content type, bytes), posted or not."""
        self.nonces: dict[tuple[str, str], Message] = {}
        """(channel, nonce) -> the message it created: ``enforce_nonce`` answers it again."""
        self.hang_uploads = 0
        """The next this-many uploads create their message and then never answer."""
        self._stopping = asyncio.Event()
        """Set by ``stop``: a hung upload's handler returns then (its client is gone by now), so the
        server's cleanup does not wait out aiohttp's 60-second shutdown timeout."""
        """Attachments the CDN serves, by name (``attachment``): ``GET /attachments/<name>``."""
        self.downloads: list[str] = []

    # ------------------------------------------------------------------ lifecycle

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # uploads: as large as the platform takes
        app.router.add_get("/gateway", self.gateway.handle)
        app.router.add_get("/attachments/{name}", self._attachment)
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "/gateway/bot", self._gateway_bot),
            ("GET", "/users/@me", self._me),
            ("GET", "/oauth2/applications/@me", self._application),
            ("GET", "/channels/{cid}", self._get_channel),
            ("GET", "/channels/{cid}/messages", self._history),
            ("POST", "/channels/{cid}/messages", self._create),
            ("PATCH", "/channels/{cid}/messages/{mid}", self._edit),
            ("DELETE", "/channels/{cid}/messages/{mid}", self._delete),
            ("POST", "/channels/{cid}/typing", self._typing),
            ("PUT", "/channels/{cid}/messages/{mid}/reactions/{emoji}/@me", self._react),
            ("DELETE", "/channels/{cid}/messages/{mid}/reactions/{emoji}/@me", self._react),
            ("POST", "/interactions/{iid}/{token}/callback", self._callback),
            ("POST", "/webhooks/{app}/{token}", self._follow_up),
            ("PATCH", "/webhooks/{app}/{token}/messages/{mid}", self._edit_follow_up),
            ("GET", "/applications/{app}/commands", self._get_commands),
            ("PUT", "/applications/{app}/commands", self._put_commands),
            ("GET", "/applications/{app}/guilds/{gid}/commands", self._get_commands),
            ("PUT", "/applications/{app}/guilds/{gid}/commands", self._put_commands),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, API + path, self._wrap(method, API + path, handler))
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def attachment(self, name: str, data: bytes, content_type: str) -> dict[str, Any]:
        """A message attachment as Discord sends it, served by this double's "CDN"."""
        self.files[name] = data
        url = f"http://127.0.0.1:{self.port}/attachments/{name}"
        return {"id": snowflake(), "filename": name, "url": url, "proxy_url": url,
                "content_type": content_type, "size": len(data)}  # fmt: skip

    async def _attachment(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.downloads.append(name)
        if "authorization" in request.headers:
            return web.Response(status=400, text="a CDN download never carries the bot token")
        data = self.files.get(name)
        return web.Response(body=data) if data is not None else web.Response(status=404)

    async def stop(self) -> None:
        self._stopping.set()
        await self.gateway.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # ------------------------------------------------------------------ world building

    def guild(self, guild_id: str, name: str, roles: dict[str, str] | None = None) -> Guild:
        guild = Guild(guild_id, name, roles=roles or {})
        self.guilds[guild_id] = guild
        return guild

    def channel(self, guild: Guild | None, channel_id: str, kind: int = GUILD_TEXT, **kw: Any) -> Channel:
        channel = Channel(channel_id, kind, guild_id=guild.id if guild else None, **kw)
        if guild is not None:
            guild.channels.append(channel)
        self.channels[channel_id] = channel
        self.messages.setdefault(channel_id, [])
        return channel

    def dm(self, channel_id: str, user: User) -> Channel:
        return self.channel(None, channel_id, DM, recipient=user)

    async def create_thread(self, parent: Channel, thread_id: str, kind: int, name: str) -> Channel:
        guild = self.guilds[str(parent.guild_id)]
        thread = self.channel(guild, thread_id, kind, name=name, parent_id=parent.id)
        await self.gateway.dispatch("THREAD_CREATE", {**thread.wire(), "newly_created": True})
        return thread

    # ------------------------------------------------------------------ what people do

    async def post(
        self, channel: Channel, user: User, content: str, *, nick: str | None = None,
        roles: list[str] | None = None, mention_bot: bool = False, reference: str | None = None,
        attachments: list[dict[str, Any]] | None = None, at: float | None = None,
    ) -> Message:  # fmt: skip
        """A person's message: kept in the channel's history and dispatched as MESSAGE_CREATE."""
        text = f"<@{BOT_ID}> {content}" if mention_bot else content
        message = Message(
            snowflake(at),
            channel,
            user,
            text,
            nick=nick,
            roles=roles or [],
            mentions=[BOT] if mention_bot else [],
            reference=reference,
            attachments=attachments or [],
        )
        self.messages[channel.id].append(message)
        await self.gateway.dispatch("MESSAGE_CREATE", message.wire())
        return message

    async def edit(self, message: Message, content: str) -> None:
        """A person edits their message: MESSAGE_UPDATE with a new ``edited_timestamp``."""
        message.content, message.edited = content, True
        message.edited_at = f"2026-01-01T00:00:{len(self.calls) % 60:02d}.{snowflake()[-6:]}+00:00"
        await self.gateway.dispatch("MESSAGE_UPDATE", message.wire())

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """An interaction body as Discord sends it: ``body`` with a fresh id, token and the rest."""
        iid = snowflake()
        return {
            "id": iid, "token": f"itok-{iid}", "application_id": APP_ID, "version": 1,
            "attachment_size_limit": 10 * 1024 * 1024, "app_permissions": "0", "entitlements": [],
            "locale": "en-US", "authorizing_integration_owners": {"1": BOT_ID},
            "context": 0 if body.get("guild_id") else 1, **body,
        }  # fmt: skip

    async def interact(self, body: dict[str, Any]) -> dict[str, Any]:
        """Dispatch an INTERACTION_CREATE (``body`` completed unless it already has an id)."""
        full = body if "id" in body else self.complete(body)
        self.tokens[full["token"]] = str(body.get("channel_id"))
        await self.gateway.dispatch("INTERACTION_CREATE", full)
        return full

    def expire(self, token: str) -> None:
        self.tokens.pop(token, None)

    def rate_limit(
        self, method: str, path: str, *, times: int = 1, retry_after: float = 1.0, scope: str = "user"
    ) -> None:
        """Answer the next ``times`` calls of ``method path`` (a route as listed, e.g.
        ``/channels/{cid}/messages``) with a 429; ``scope="global"`` is the bot-wide limit."""
        self.limits[f"{method} {API}{path}"] = Limit(times, retry_after, scope)

    # ------------------------------------------------------------------ what tests read

    def view(self, channel_id: str) -> list[Message]:
        """The bot's messages a channel shows, in order."""
        return [m for m in self.messages.get(channel_id, []) if m.author.id == BOT_ID and not m.deleted]

    def of(self, method: str, path_part: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and path_part in c.path]

    # ------------------------------------------------------------------ the REST surface

    def _wrap(self, method: str, route: str, handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            body = json.loads(raw) if raw and request.content_type == "application/json" else None
            if raw and request.content_type == "multipart/form-data":
                body = _multipart(request.headers["Content-Type"], raw)
            call = Call(method, request.path_qs, body, 0, time.monotonic())
            self.calls.append(call)
            response = self._refusal(method, route, request, call)
            if response is None:
                response = await handler(request, body if isinstance(body, dict | list) else {})
            call.status = response.status
            return response

        return run

    def _refusal(self, method: str, route: str, request: web.Request, call: Call) -> web.Response | None:
        public = route.startswith((API + "/interactions", API + "/webhooks"))
        if not public and request.headers.get("Authorization") != f"Bot {TOKEN}":
            return reply(401, {"message": "401: Unauthorized", "code": 0})
        limit = self.limits.get(f"{method} {route}")
        if limit is not None and limit.times > 0:
            limit.times -= 1
            return _too_many(limit.retry_after, limit.scope)
        cid = request.match_info.get("cid")
        if self.channel_budget is not None and cid and method in ("POST", "PATCH") and "typing" not in route:
            count, window = self.channel_budget
            recent = [c for c in self.calls[:-1] if _counts(c, cid) and call.at - c.at < window]
            if len(recent) >= count:
                self.violations.append(call)
                return _too_many(window - (call.at - recent[0].at), "user")
        return None

    async def _gateway_bot(self, request: web.Request, body: Any) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return reply(200, {"url": self.ws_url, "shards": 1, "session_start_limit": limit})

    async def _me(self, request: web.Request, body: Any) -> web.Response:
        return reply(200, {**BOT.wire(), "flags": 0, "mfa_enabled": False, "verified": True})

    async def _application(self, request: web.Request, body: Any) -> web.Response:
        owner = {"id": "1", "username": "owner", "discriminator": "0", "avatar": None, "global_name": None}
        return reply(
            200,
            {
                "id": APP_ID,
                "name": "chatgate",
                "icon": None,
                "description": "",
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": owner,
                "verify_key": "00",
                "flags": 0,
                "team": None,
                "summary": "",
                "rpc_origins": [],
            },
        )

    async def _get_channel(self, request: web.Request, body: Any) -> web.Response:
        channel = self.channels.get(request.match_info["cid"])
        return (
            reply(404, {"message": "Unknown Channel", "code": 10003})
            if channel is None
            else reply(200, channel.wire())
        )

    async def _history(self, request: web.Request, body: Any) -> web.Response:
        channel = self.channels.get(request.match_info["cid"])
        if channel is None:
            return reply(404, {"message": "Unknown Channel", "code": 10003})
        if self.history_delay:
            await asyncio.sleep(self.history_delay)
        after = int(request.query.get("after", "0"))
        limit = min(100, int(request.query.get("limit", "50")))
        later = [m for m in self.messages[channel.id] if int(m.id) > after and not m.deleted]
        # The oldest ``limit`` after ``after``, newest first, as Discord answers.
        return reply(200, [m.wire() for m in reversed(later[:limit])])

    async def _create(self, request: web.Request, body: Any) -> web.Response:
        channel = self.channels.get(request.match_info["cid"])
        if channel is None:
            return reply(404, {"message": "Unknown Channel", "code": 10003})
        if self.fail_sends > 0:
            self.fail_sends -= 1
            return reply(500, {"message": "500: Internal Server Error", "code": 0})
        ref = (body.get("message_reference") or {}).get("message_id")
        nonce = body.get("nonce")
        if nonce is not None and len(str(nonce)) > 25:
            return reply(400, {"message": "Invalid Form Body (nonce)", "code": 50035})
        files = body.get("_files") or []
        self.uploaded.extend(files)
        if body.get("enforce_nonce") and (channel.id, str(nonce)) in self.nonces:
            return reply(200, self.nonces[(channel.id, str(nonce))].wire())  # Discord's dedupe
        attachments = []
        for index, (_name, mime, data) in enumerate(files):
            declared = [a for a in body.get("attachments") or [] if a.get("id") == index]
            if not declared:
                return reply(400, {"message": "Invalid Form Body (attachments)", "code": 50035})
            attachments.append(self.attachment(f"{snowflake()}-{declared[0]['filename']}", data, mime))
        if not (body.get("content") or "").strip() and not attachments and not body.get("components"):
            return reply(400, {"message": "Cannot send an empty message", "code": 50006})
        message = Message(
            snowflake(),
            channel,
            BOT,
            (body.get("content") or "").strip(),  # Discord trims what it shows
            reference=ref,
            components=body.get("components") or [],
            attachments=attachments,
        )
        self.messages[channel.id].append(message)
        if nonce is not None:
            self.nonces[(channel.id, str(nonce))] = message
        await self.gateway.dispatch("MESSAGE_CREATE", message.wire())
        if files and self.hang_uploads > 0:
            self.hang_uploads -= 1
            await self._stopping.wait()  # posted, never answered (until the server stops)
        return reply(200, message.wire())

    def _find(self, request: web.Request) -> Message | None:
        for message in self.messages.get(request.match_info["cid"], []):
            if message.id == request.match_info["mid"] and not message.deleted:
                return message
        return None

    async def _edit(self, request: web.Request, body: Any) -> web.Response:
        message = self._find(request)
        if message is None or message.author.id != BOT_ID:
            return reply(404, {"message": "Unknown Message", "code": 10008})
        if "content" in body:
            message.content = (body["content"] or "").strip()  # Discord trims what it shows
        if "components" in body:
            message.components = body["components"] or []
        message.edited = True
        await self.gateway.dispatch("MESSAGE_UPDATE", message.wire())
        return reply(200, message.wire())

    async def _delete(self, request: web.Request, body: Any) -> web.Response:
        message = self._find(request)
        if message is None:
            return reply(404, {"message": "Unknown Message", "code": 10008})
        message.deleted = True
        await self.gateway.dispatch("MESSAGE_DELETE", {"id": message.id, "channel_id": message.channel.id})
        return reply(204)

    async def _typing(self, request: web.Request, body: Any) -> web.Response:
        return reply(204)

    async def _react(self, request: web.Request, body: Any) -> web.Response:
        """The bot's own reaction on any message it can see (a person's included)."""
        for message in self.messages.get(request.match_info["cid"], []):
            if message.id == request.match_info["mid"] and not message.deleted:
                mine = self.reactions.setdefault(message.id, set())
                emoji = request.match_info["emoji"]
                (mine.add if request.method == "PUT" else mine.discard)(emoji)
                return reply(204)
        return reply(404, {"message": "Unknown Message", "code": 10008})

    async def _callback(self, request: web.Request, body: Any) -> web.Response:
        if request.match_info["token"] not in self.tokens:
            return reply(404, {"message": "Unknown interaction", "code": 10062})
        self.interaction_responses.setdefault(request.match_info["iid"], []).append(body)
        return reply(204)

    async def _follow_up(self, request: web.Request, body: Any) -> web.Response:
        channel_id = self.tokens.get(request.match_info["token"])
        if channel_id is None:
            return reply(401, {"message": "Invalid Webhook Token", "code": 50027})
        message = Message(snowflake(), self.channels[channel_id], BOT, body.get("content") or "")
        self.messages[channel_id].append(message)
        return reply(200, message.wire())

    async def _edit_follow_up(self, request: web.Request, body: Any) -> web.Response:
        channel_id = self.tokens.get(request.match_info["token"])
        if channel_id is None:
            return reply(401, {"message": "Invalid Webhook Token", "code": 50027})
        for message in self.messages[channel_id]:
            if message.id == request.match_info["mid"]:
                message.content = body.get("content") or ""
                return reply(200, message.wire())
        return reply(404, {"message": "Unknown Message", "code": 10008})

    async def _get_commands(self, request: web.Request, body: Any) -> web.Response:
        return reply(200, self.commands.get(request.match_info.get("gid", "global"), []))

    async def _put_commands(self, request: web.Request, body: Any) -> web.Response:
        scope = request.match_info.get("gid", "global")
        stored = [_as_discord_stores(c) for c in body]
        self.commands[scope] = stored
        return reply(200, stored)


def _as_discord_stores(command: dict[str, Any]) -> dict[str, Any]:
    """A registered command as Discord answers it: its own fields added, ``required: false`` dropped."""
    options = [
        {k: v for k, v in o.items() if not (k == "required" and v is False)}
        | {"name_localizations": None, "description_localizations": None}
        for o in command.get("options") or ()
    ]
    extra = {"id": snowflake(), "application_id": APP_ID, "version": "1", "nsfw": False,
             "default_member_permissions": None, "contexts": None, "name_localizations": None}  # fmt: skip
    stored = {**command, **extra}
    if options:
        stored["options"] = options
    return stored


def _channel_of(call: Call) -> str | None:
    parts = call.path.split("?")[0].split("/")
    return parts[4] if len(parts) > 4 and parts[3] == "channels" else None


def _counts(call: Call, channel_id: str) -> bool:
    """A message create or edit in ``channel_id`` that Discord accepted."""
    sending = call.method in ("POST", "PATCH") and "typing" not in call.path
    return sending and call.status < 400 and _channel_of(call) == channel_id


def _too_many(retry_after: float, scope: str) -> web.Response:
    body = {
        "message": "You are being rate limited.",
        "retry_after": round(retry_after, 3),
        "global": scope == "global",
        "code": 0,
    }
    headers = {
        "Via": "1.1 google",
        "Retry-After": str(max(1, round(retry_after))),
        "X-RateLimit-Scope": scope,
    }
    if scope == "global":
        headers["X-RateLimit-Global"] = "true"
    return reply(429, body, headers)


def _multipart(content_type: str, raw: bytes) -> dict[str, Any]:
    """A create-message multipart body as Discord reads it: ``payload_json`` is the JSON body,
    each ``files[n]`` part a file (in ``_files``: name, content type, bytes)."""
    import email
    import email.policy

    parsed = email.message_from_bytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw, policy=email.policy.HTTP
    )
    body: dict[str, Any] = {}
    files: list[tuple[str, str, bytes]] = []
    for part in parsed.iter_parts():  # type: ignore[attr-defined]
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True) or b""
        if name == "payload_json":
            body.update(json.loads(data))
        elif isinstance(name, str) and name.startswith("files["):
            files.append((part.get_filename() or "", part.get_content_type(), data))
    body["_files"] = files
    return body
