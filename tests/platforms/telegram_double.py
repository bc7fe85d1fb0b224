"""A Telegram Bot API server double on 127.0.0.1, for driving the adapter's real Bot API client.

It serves ``/bot<token>/<method>`` for the methods the adapter uses (getMe,
getUpdates, sendMessage, editMessageText, deleteMessage, sendChatAction,
answerCallbackQuery, setMyCommands), with Telegram's answer shapes:

- getUpdates long-polls: it returns updates with ``update_id >= offset`` as soon as
  there are any, or ``[]`` after ``timeout`` seconds. An offset confirms (forgets)
  every older update; a negative offset keeps only the last ``-offset`` ones.
- Sent messages are recorded per chat and topic, with message ids shared with
  the users' messages of that chat (like Telegram). ``view(chat, topic)`` is what
  the chat would show: the bot's messages in order, with their visible text.
- ``parse_mode=HTML`` is parsed strictly (only Telegram's tags, only its four
  named entities, no bare ``<`` or ``&``) into the visible text; an error is a
  400 "can't parse entities", and so is any text containing ``parse_fail_marker``.
- ``flood(chat, retry_after)`` makes the next call to that chat answer 429 with
  ``retry_after``; every call during the penalty also gets a 429 and counts as a
  violation (the gateway should not have made it).
- ``global_limit = N`` makes the bot's chat calls (send, edit, delete, chat action)
  answer 429 with ``retry_after`` once N of them were accepted within the last second,
  like Telegram's overall limit; ``log`` records every call with its chat, arrival time
  and HTTP status, for checks over time windows (``busiest``).

Tests push updates with ``push_message``, ``push_callback`` and ``push_raw``.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from aiohttp import web

BOT_ID = 777000111
BOT_USERNAME = "chatgate_test_bot"
TOKEN = f"{BOT_ID}:AAH-test-secret-token-do-not-log-9f8e7d"
ALLOWED_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler",
    "a", "code", "pre", "blockquote", "tg-emoji",
}  # fmt: skip


class EntityError(Exception):
    pass


class _TelegramHtml(HTMLParser):
    """Telegram's HTML dialect, strictly: returns the visible text or raises ``EntityError``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS:
            raise EntityError(f'unsupported start tag "{tag}"')
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            raise EntityError(f'can\'t find end tag corresponding to start tag "{tag}"')
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        for bad in "<&>":
            if bad in data:
                raise EntityError(f"unescaped {bad!r} in text")
        self.out.append(data)

    def handle_entityref(self, name: str) -> None:
        known = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
        if name not in known:
            raise EntityError(f"unsupported entity &{name};")
        self.out.append(known[name])

    def handle_charref(self, name: str) -> None:
        self.out.append(chr(int(name[1:], 16) if name.lower().startswith("x") else int(name)))


def visible_text(text: str, parse_mode: str | None) -> str:
    if parse_mode is None:
        return text
    if parse_mode != "HTML":
        raise EntityError(f"unsupported parse mode {parse_mode}")
    parser = _TelegramHtml()
    parser.feed(text)
    parser.close()
    if parser.stack:
        raise EntityError(f'can\'t find end tag corresponding to start tag "{parser.stack[-1]}"')
    return "".join(parser.out)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass
class Sent:
    """One message the bot put in a chat."""

    chat_id: int
    message_id: int
    thread_id: int | None
    text: str
    """Visible text (after HTML parsing)."""
    raw: str
    parse_mode: str | None
    reply_to: int | None
    at: float
    edits: int = 0
    deleted: bool = False
    keyboard: list[list[dict[str, Any]]] | None = None
    """The inline keyboard under the message (an edit without one removes it, as on Telegram)."""
    file: Uploaded | None = None
    """The photo or document the message carries (sendPhoto, sendDocument); its caption is ``text``."""


@dataclass(frozen=True)
class Uploaded:
    """A file a sendPhoto or sendDocument carried, as the multipart body named it."""

    method: str
    name: str
    mime: str
    data: bytes


@dataclass
class Flood:
    retry_after: int
    until: float = 0.0
    armed: bool = True
    hits: list[float] = field(default_factory=list)
    violations: int = 0


CHAT_METHODS = frozenset(
    {"sendMessage", "editMessageText", "deleteMessage", "sendChatAction", "sendPhoto", "sendDocument"}
)
"""The calls Telegram's rate limits count (and the gateway's rate budget paces)."""


@dataclass(frozen=True)
class Call:
    """One API call as the double saw it: when it arrived and what it answered."""

    method: str
    chat_id: int | None
    at: float
    """Event-loop time of arrival."""
    status: int


@dataclass(frozen=True)
class Poll:
    """One getUpdates as the double served it: from its arrival until it answered or its
    client went away (with ``cancel_abandoned``; otherwise until the long poll ran out)."""

    start: float
    end: float
    answered: bool


def overlapping(polls: Sequence[Poll]) -> list[tuple[Poll, Poll]]:
    """Every pair of getUpdates windows that overlap in time (two pollers at once)."""
    ordered = sorted(polls, key=lambda p: p.start)
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :] if b.start < a.end]


def busiest(times: Sequence[float], width: float) -> int:
    """The most calls in any half-open window ``[t, t + width)`` (a sliding window over ``times``)."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, t + width) - i for i, t in enumerate(ordered)), default=0)


@dataclass(frozen=True)
class User:
    id: int
    first_name: str
    last_name: str | None = None
    username: str | None = None

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "is_bot": False, "first_name": self.first_name}
        if self.last_name:
            data["last_name"] = self.last_name
        if self.username:
            data["username"] = self.username
        return data


@dataclass(frozen=True)
class Chat:
    id: int
    type: str
    title: str | None = None
    is_forum: bool = False

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.title:
            data["title"] = self.title
        if self.is_forum:
            data["is_forum"] = True
        if self.type == "private":
            data["first_name"] = f"user{self.id}"
        return data


def _keyboard(params: dict[str, Any]) -> list[list[dict[str, Any]]] | None:
    markup = params.get("reply_markup")
    if not markup:
        return None
    parsed = json.loads(markup) if isinstance(markup, str) else markup
    rows: list[list[dict[str, Any]]] = parsed.get("inline_keyboard") or []
    return rows


def private(user: User) -> Chat:
    return Chat(user.id, "private")


class BotApiDouble:
    def __init__(
        self, token: str = TOKEN, parse_fail_marker: str | None = None, cancel_abandoned: bool = False
    ) -> None:
        self.token = token
        self.cancel_abandoned = cancel_abandoned
        """End a call's handling when its client disconnects (aiohttp's handler cancellation), as a
        server frees a long poll whose client left; off, a handler runs on as if nobody left."""
        self.polls: list[Poll] = []
        """Every getUpdates window, for checks that no two processes polled at once (``overlapping``)."""
        self.parse_fail_marker = parse_fail_marker
        self.pending: list[dict[str, Any]] = []
        self.next_update_id = 5000
        self.confirmed_below = 0
        """Every update below this id was confirmed by an offset (and forgotten)."""
        self.sent: dict[int, dict[int, Sent]] = {}
        self._message_ids: dict[int, int] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.callback_answers: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] | None = None
        self.floods: dict[int, Flood] = {}
        self.get_updates_calls = 0
        self.offsets: list[int | None] = []
        """The offset of every getUpdates call, in order."""
        self.keep_confirmed = False
        """Act as if confirmations never arrived: an offset filters, but forgets nothing."""
        self.on_callback_answer: Callable[[dict[str, Any]], None] | None = None
        self.log: list[Call] = []
        self.global_limit: int | None = None
        """Chat calls accepted per second across the bot before the rest get 429 (None: no limit)."""
        self._accepted: deque[float] = deque()
        self._changed = asyncio.Condition()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.files: dict[str, tuple[bytes, str]] = {}
        """By file_id: the bytes and the ``file_path`` getFile answers (``add_file``)."""
        self.downloads: list[str] = []
        """Every file download request's path, in order."""
        self.hang_downloads = False
        self.hang_uploads = 0
        """The next this-many uploads are kept (the message is posted) and never answered: the
        client sees its upload hang, as when Telegram posted it and the answer was lost."""
        self.uploads_seen = 0
        """Every sendPhoto/sendDocument request received, answered or not."""
        """A download sends half the file, then hangs until its client goes away."""

    # ------------------------------------------------------------ lifecycle

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # uploads: as large as the platform takes
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=1.0, handler_cancellation=self.cancel_abandoned
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        self._closing = True
        await self._notify()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def pairing_code_for_a_stranger(self) -> str:
        """A stranger writes to the bot; its answer (the pairing code, 8 letters) once it comes."""
        kim = User(8080, "Kim")
        await self.push_message(private(kim), kim, "hi bot")
        await self.wait_for(lambda: bool(self.view(kim.id)), what="the pairing reply on Telegram")
        return self.view(kim.id)[0].text

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
        """Wait until ``predicate()`` holds (checked on every change the double sees)."""
        async with asyncio.timeout(timeout):
            async with self._changed:
                await self._changed.wait_for(predicate)
        if not predicate():  # pragma: no cover - wait_for only returns when it holds
            raise AssertionError(what)

    # ------------------------------------------------------------ pushing updates

    def _next_message_id(self, chat_id: int) -> int:
        ident = self._message_ids.get(chat_id, 0) + 1
        self._message_ids[chat_id] = ident
        return ident

    async def push_raw(self, body: dict[str, Any], update_id: int | None = None) -> int:
        ident = self.next_update_id if update_id is None else update_id
        self.next_update_id = max(self.next_update_id, ident + 1)
        self.pending.append({"update_id": ident, **body})
        await self._notify()
        return ident

    def message_json(
        self,
        chat: Chat,
        user: User,
        text: str | None = None,
        *,
        topic: int | None = None,
        reply_to: int | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        message_id = self._next_message_id(chat.id)
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat.json(),
            "from": user.json(),
            **extra,
        }
        if text is not None:
            message["text"] = text
        if topic is not None:
            message["message_thread_id"] = topic
            message["is_topic_message"] = True
            # In a forum topic every message replies to the topic's creation message at least.
            quoted = reply_to if reply_to is not None else topic
            message["reply_to_message"] = {
                "message_id": quoted,
                "date": int(time.time()),
                "chat": chat.json(),
                "message_thread_id": topic,
                **(
                    {"forum_topic_created": {"name": f"topic {topic}", "icon_color": 1}}
                    if quoted == topic
                    else {}
                ),
            }
        elif reply_to is not None:
            message["reply_to_message"] = {
                "message_id": reply_to,
                "date": int(time.time()),
                "chat": chat.json(),
            }
        return message

    async def push_message(
        self, chat: Chat, user: User, text: str | None = None, **kwargs: Any
    ) -> tuple[int, int]:
        """Push a user's message; returns ``(update_id, message_id)``."""
        message = self.message_json(chat, user, text, **kwargs)
        update_id = await self.push_raw({"message": message})
        return update_id, message["message_id"]

    def add_file(self, data: bytes, suffix: str) -> str:
        """A file Telegram holds; returns its file_id (getFile answers its path)."""
        n = len(self.files) + 1
        file_id = f"AgACAgQAAx-{n:04d}"
        self.files[file_id] = (data, f"documents/file_{n}.{suffix}")
        return file_id

    async def push_photo(
        self, chat: Chat, user: User, data: bytes, caption: str | None = None
    ) -> tuple[int, int]:
        """A photo message (Telegram re-encodes photos; here the bytes stay as given)."""
        file_id = self.add_file(data, "jpg")
        sizes = [{"file_id": file_id, "file_unique_id": f"u{file_id}", "width": 90, "height": 60,
                  "file_size": len(data)}]  # fmt: skip
        extra: dict[str, Any] = {"photo": sizes}
        if caption is not None:
            extra["caption"] = caption
        return await self.push_message(chat, user, None, **extra)

    async def push_document(
        self, chat: Chat, user: User, data: bytes, name: str, mime: str, caption: str | None = None
    ) -> tuple[int, int]:
        file_id = self.add_file(data, name.rsplit(".", 1)[-1])
        document = {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_name": name,
                    "mime_type": mime, "file_size": len(data)}  # fmt: skip
        extra: dict[str, Any] = {"document": document}
        if caption is not None:
            extra["caption"] = caption
        return await self.push_message(chat, user, None, **extra)

    async def push_voice(
        self, chat: Chat, user: User, data: bytes, duration: int = 3, caption: str | None = None
    ) -> tuple[int, int]:
        """A voice note, as Telegram sends one: OGG/Opus, ``audio/ogg``, its length in seconds."""
        file_id = self.add_file(data, "oga")
        voice = {"file_id": file_id, "file_unique_id": f"u{file_id}", "duration": duration,
                 "mime_type": "audio/ogg", "file_size": len(data)}  # fmt: skip
        extra: dict[str, Any] = {"voice": voice}
        if caption is not None:
            extra["caption"] = caption
        return await self.push_message(chat, user, None, **extra)

    async def push_video_note(
        self, chat: Chat, user: User, data: bytes, duration: int = 3
    ) -> tuple[int, int]:
        """A round video note, as Telegram sends one: an MP4 with its length (no MIME type given)."""
        file_id = self.add_file(data, "mp4")
        note = {"file_id": file_id, "file_unique_id": f"u{file_id}", "length": 64, "duration": duration,
                "file_size": len(data)}  # fmt: skip
        return await self.push_message(chat, user, None, video_note=note)

    async def push_callback(
        self, chat: Chat, user: User, message_id: int, data: str, query_id: str | None = None
    ) -> tuple[int, str]:
        query_id = query_id or f"cbq-{self.next_update_id}"
        attached = {"message_id": message_id, "date": int(time.time()), "chat": chat.json(), "text": "menu"}
        body = {
            "callback_query": {
                "id": query_id,
                "from": user.json(),
                "chat_instance": f"ci-{chat.id}",
                "message": attached,
                "data": data,
            }
        }
        return await self.push_raw(body), query_id

    # ------------------------------------------------------------ what chats show

    def view(self, chat_id: int, thread_id: int | None = None) -> list[Sent]:
        """The bot's messages in one chat (and topic), in order, without deleted ones."""
        rows = self.sent.get(chat_id, {})
        return [
            m
            for _, m in sorted(rows.items())
            if not m.deleted and (thread_id is None or m.thread_id == thread_id)
        ]

    def all_sent(self) -> list[Sent]:
        return [m for rows in self.sent.values() for m in rows.values() if not m.deleted]

    def flood(self, chat_id: int, retry_after: int) -> Flood:
        script = Flood(retry_after)
        self.floods[chat_id] = script
        return script

    # ------------------------------------------------------------ the API

    async def _dispatch(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return self._error(401, "Unauthorized")
        method = request.match_info["method"]
        params: dict[str, Any] = dict(await request.post()) if request.can_read_body else {}
        params.update(request.query)
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return self._error(404, "Not Found")
        self.calls.append((method, params))
        chat = int(params["chat_id"]) if str(params.get("chat_id", "")).lstrip("-").isdigit() else None
        now = asyncio.get_running_loop().time()
        response: web.Response | None = self._over_global_limit(now) if method in CHAT_METHODS else None
        try:
            if response is None:
                response = await handler(params)
                if method in CHAT_METHODS and response.status == 200:
                    self._accepted.append(now)
        finally:
            self.log.append(Call(method, chat, now, response.status if response is not None else 500))
            if method == "getUpdates":
                self.polls.append(Poll(now, asyncio.get_running_loop().time(), response is not None))
            await self._notify()
        return response

    def _over_global_limit(self, now: float) -> web.Response | None:
        if self.global_limit is None:
            return None
        while self._accepted and self._accepted[0] <= now - 1.0:
            self._accepted.popleft()
        if len(self._accepted) < self.global_limit:
            return None
        left = max(1, math.ceil(self._accepted[0] + 1.0 - now))
        return self._error(429, f"Too Many Requests: retry after {left}", retry_after=left)

    def chat_calls(self, *, ok: bool | None = None) -> list[Call]:
        """The logged chat calls (send, edit, delete, chat action); ``ok`` filters by success."""
        return [c for c in self.log if c.method in CHAT_METHODS and (ok is None or (c.status == 200) == ok)]

    @staticmethod
    def _ok(result: Any) -> web.Response:
        return web.json_response({"ok": True, "result": result})

    @staticmethod
    def _error(code: int, description: str, **parameters: Any) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if parameters:
            body["parameters"] = parameters
        return web.json_response(body, status=code)

    def _flooded(self, chat_id: int) -> web.Response | None:
        script = self.floods.get(chat_id)
        if script is None:
            return None
        now = asyncio.get_running_loop().time()
        if script.armed:
            script.armed = False
            script.until = now + script.retry_after
            script.hits.append(now)
        elif now < script.until:
            script.violations += 1
            script.hits.append(now)
        else:
            return None
        left = max(1, round(script.until - now))
        return self._error(429, f"Too Many Requests: retry after {left}", retry_after=left)

    async def _m_getFile(self, params: dict[str, Any]) -> web.Response:
        entry = self.files.get(str(params.get("file_id", "")))
        if entry is None:
            return self._error(400, "Bad Request: wrong file_id or the file is temporarily unavailable")
        data, path = entry
        if len(data) > 20 * 1024 * 1024:
            return self._error(400, "Bad Request: file is too big")
        file_id = str(params["file_id"])
        return self._ok(
            {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": len(data), "file_path": path}
        )

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.Response(status=404)
        path = request.match_info["path"]
        self.downloads.append(path)
        await self._notify()
        found = next((data for data, p in self.files.values() if p == path), None)
        if found is None:
            return web.Response(status=404)
        response = web.StreamResponse()
        response.content_length = len(found)
        await response.prepare(request)
        if self.hang_downloads:
            await response.write(found[: len(found) // 2])
            await asyncio.Event().wait()  # until the client is gone (and the server stops)
        await response.write(found)
        await response.write_eof()
        return response

    async def _m_getMe(self, params: dict[str, Any]) -> web.Response:
        return self._ok(
            {"id": BOT_ID, "is_bot": True, "first_name": "Chatgate Test", "username": BOT_USERNAME}
        )

    async def _m_setMyCommands(self, params: dict[str, Any]) -> web.Response:
        self.commands = json.loads(params["commands"])
        return self._ok(True)

    async def _m_getUpdates(self, params: dict[str, Any]) -> web.Response:
        self.get_updates_calls += 1
        offset = int(params["offset"]) if "offset" in params else None
        self.offsets.append(offset)
        timeout = float(params.get("timeout", 0))
        limit = int(params.get("limit", 100))
        if offset is not None and offset < 0:
            self.pending = self.pending[offset:]
            if self.pending:
                self.confirmed_below = self.pending[0]["update_id"]
        elif offset is not None and not self.keep_confirmed:
            self.confirmed_below = max(self.confirmed_below, offset)
            self.pending = [u for u in self.pending if u["update_id"] >= offset]
        await self._notify()  # waiters on confirmations must not wait for this long poll to end

        def due() -> list[dict[str, Any]]:
            return [u for u in self.pending if offset is None or offset < 0 or u["update_id"] >= offset]

        if not due() and timeout > 0 and not self._closing:
            try:
                async with asyncio.timeout(timeout), self._changed:
                    await self._changed.wait_for(lambda: bool(due()) or self._closing)
            except TimeoutError:
                pass
        return self._ok(due()[:limit])

    def _message_result(self, sent: Sent) -> dict[str, Any]:
        result: dict[str, Any] = {
            "message_id": sent.message_id,
            "date": int(time.time()),
            "chat": {"id": sent.chat_id, "type": "private" if sent.chat_id > 0 else "supergroup"},
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Chatgate Test", "username": BOT_USERNAME},
            "text": sent.text,
        }
        if sent.thread_id is not None:
            result["message_thread_id"] = sent.thread_id
            result["is_topic_message"] = True
        return result

    def _render(self, params: dict[str, Any]) -> str | web.Response:
        text = params.get("text", "")
        parse_mode = params.get("parse_mode")
        if parse_mode == "HTML" and self.parse_fail_marker and self.parse_fail_marker in text:
            return self._error(
                400, "Bad Request: can't parse entities: unsupported start tag at byte offset 7"
            )
        try:
            shown = visible_text(text, parse_mode)
        except EntityError as exc:
            return self._error(400, f"Bad Request: can't parse entities: {exc}")
        if not shown.strip():
            return self._error(400, "Bad Request: message text is empty")
        if utf16_len(shown) > 4096:
            return self._error(400, "Bad Request: message is too long")
        return shown

    async def _m_sendMessage(self, params: dict[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if (flooded := self._flooded(chat_id)) is not None:
            return flooded
        shown = self._render(params)
        if isinstance(shown, web.Response):
            return shown
        reply_to = None
        if "reply_parameters" in params:
            reply_to = json.loads(params["reply_parameters"]).get("message_id")
        elif "reply_to_message_id" in params:
            reply_to = int(params["reply_to_message_id"])
        thread = int(params["message_thread_id"]) if "message_thread_id" in params else None
        sent = Sent(
            chat_id=chat_id,
            message_id=self._next_message_id(chat_id),
            thread_id=thread,
            text=shown,
            raw=params.get("text", ""),
            parse_mode=params.get("parse_mode"),
            reply_to=reply_to,
            at=asyncio.get_running_loop().time(),
            keyboard=_keyboard(params),
        )
        self.sent.setdefault(chat_id, {})[sent.message_id] = sent
        return self._ok(self._message_result(sent))

    async def _m_sendPhoto(self, params: dict[str, Any]) -> web.Response:
        return await self._upload("sendPhoto", "photo", params)

    async def _m_sendDocument(self, params: dict[str, Any]) -> web.Response:
        return await self._upload("sendDocument", "document", params)

    async def _upload(self, method: str, field_name: str, params: dict[str, Any]) -> web.Response:
        """A multipart upload, as Telegram checks it: the file is a part with a filename, the
        caption at most 1024 characters; a photo must be an image Telegram can decode."""
        self.uploads_seen += 1
        chat_id = int(params["chat_id"])
        if (flooded := self._flooded(chat_id)) is not None:
            return flooded
        part = params.get(field_name)
        if not isinstance(part, web.FileField):
            return self._error(400, f"Bad Request: there is no {field_name} in the request")
        data = part.file.read()
        caption = str(params.get("caption", ""))
        if len(caption) > 1024:
            return self._error(400, "Bad Request: message caption is too long")
        if method == "sendPhoto" and not data.startswith((b"\x89PNG", b"\xff\xd8\xff", b"RIFF")):
            return self._error(400, "Bad Request: IMAGE_PROCESS_FAILED")
        thread = int(params["message_thread_id"]) if "message_thread_id" in params else None
        sent = Sent(
            chat_id=chat_id,
            message_id=self._next_message_id(chat_id),
            thread_id=thread,
            text=caption,
            raw=caption,
            parse_mode=None,
            reply_to=json.loads(params["reply_parameters"]).get("message_id")
            if "reply_parameters" in params
            else None,
            at=asyncio.get_running_loop().time(),
            file=Uploaded(method, part.filename, part.content_type, data),
        )
        self.sent.setdefault(chat_id, {})[sent.message_id] = sent
        if self.hang_uploads > 0:
            self.hang_uploads -= 1
            await self._notify()
            await asyncio.Event().wait()  # posted, never answered (until the client goes away)
        return self._ok(self._message_result(sent))

    def files_sent(self, chat_id: int) -> list[Sent]:
        """The chat's messages that carry a file, in order."""
        return [s for s in self.view(chat_id) if s.file is not None]

    async def _m_editMessageText(self, params: dict[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if (flooded := self._flooded(chat_id)) is not None:
            return flooded
        sent = self.sent.get(chat_id, {}).get(int(params["message_id"]))
        if sent is None or sent.deleted:
            return self._error(400, "Bad Request: message to edit not found")
        shown = self._render(params)
        if isinstance(shown, web.Response):
            return shown
        if shown == sent.text:
            return self._error(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup"
                " are exactly the same as a current content and reply markup of the message",
            )
        sent.text, sent.raw, sent.parse_mode = shown, params.get("text", ""), params.get("parse_mode")
        sent.keyboard = _keyboard(params)
        sent.edits += 1
        sent.at = asyncio.get_running_loop().time()
        return self._ok(self._message_result(sent))

    async def _m_deleteMessage(self, params: dict[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if (flooded := self._flooded(chat_id)) is not None:
            return flooded
        sent = self.sent.get(chat_id, {}).get(int(params["message_id"]))
        if sent is None or sent.deleted:
            return self._error(400, "Bad Request: message to delete not found")
        sent.deleted = True
        return self._ok(True)

    async def _m_sendChatAction(self, params: dict[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if (flooded := self._flooded(chat_id)) is not None:
            return flooded
        return self._ok(True)

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> web.Response:
        self.callback_answers.append(dict(params))
        if self.on_callback_answer is not None:
            self.on_callback_answer(dict(params))
        return self._ok(True)


# ---------------------------------------------------------------- harness for in-process gateways

TOKEN_ENV = "TG_TEST_BOT_TOKEN"
STOP_TIMEOUT = 20.0


def telegram_config(double: BotApiDouble, tmp_path: Any, **overrides: Any) -> Any:
    """A gateway config with only Telegram enabled, pointed at ``double``; ``overrides`` merge in."""
    from chatgate.app.config import GatewayConfig
    from chatgate.platforms.kit.conform import conform

    telegram: dict[str, Any] = {
        "enabled": True,
        "token_env": TOKEN_ENV,
        "allow_users": [],
        "api_base": double.base,
        "poll_timeout_seconds": 5,
    }
    telegram.update(overrides.pop("telegram", {}))
    values: dict[str, Any] = {
        "http": {"port": 0},
        "agent": {"echo": {"chunk_delay_ms": 2}},
        "platforms": {"web": {"enabled": False}, "telegram": telegram},
        "locks": {"credential_dir": str(tmp_path / "locks")},
        "shutdown": {"drain_seconds": 5, "outbox_flush_seconds": 2},
    }
    values.update(overrides)
    return conform(GatewayConfig, values)


class Gateways:
    """Real in-process gateways, each on its own state dir under ``tmp_path``; all stopped at the end."""

    def __init__(self, tmp_path: Any) -> None:
        self.tmp_path = tmp_path
        self.started: list[Any] = []

    async def start(self, config: Any, state: str = "state", store: Any = None) -> Any:
        from chatgate.app.gateway import Gateway

        gateway = Gateway(config, self.tmp_path / state, store=store)
        try:
            await gateway.start()
        except BaseException:
            await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)
            raise
        self.started.append(gateway)
        return gateway

    async def stop(self, gateway: Any) -> None:
        self.started.remove(gateway)
        await asyncio.wait_for(gateway.stop(), STOP_TIMEOUT)

    async def stop_all(self) -> None:
        for gateway in reversed(list(self.started)):
            await self.stop(gateway)


def echo_of(text: str) -> str:
    return f"echo: {text}"
