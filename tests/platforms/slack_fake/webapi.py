"""The fake Slack's Web API: the methods the adapter calls, with Slack's answer shapes.

- Every call is logged (``calls``: method, params, HTTP status, arrival time).
- ``rate_limit(method, retry_after, times, channel)`` answers the next calls 429 with a
  ``Retry-After`` header; ``fail(method, error, times)`` answers ``{"ok": false, "error"}``.
- Messages are kept per channel (``view``): what a user would see, in order, with
  their thread, blocks and (for a native stream) whether it is still streaming.
- ``streaming=False`` makes ``chat.startStream`` unknown (a workspace without it);
  ``scopes`` lacking ``assistant:write`` makes ``assistant.threads.setStatus`` answer
  ``missing_scope``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from slack_fake.payloads import APP_TOKEN, BOT_TOKEN, BOT_USER, TEAM, next_ts
from slack_fake.socket_mode import Envelope, SocketModeServer


@dataclass
class Posted:
    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    blocks: list[Any] | None = None
    deleted: bool = False
    streaming: bool = False
    edits: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    """Files shared with the message (``files.completeUploadExternal``): id, title, bytes."""


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    status: int
    at: float


@dataclass
class FakeSlack:
    streaming: bool = True
    scopes: frozenset[str] = frozenset({"chat:write", "assistant:write", "im:history", "channels:history"})
    socket: SocketModeServer = field(default_factory=SocketModeServer)
    calls: list[Call] = field(default_factory=list)
    messages: dict[str, list[Posted]] = field(default_factory=dict)
    ephemerals: list[tuple[str, str, str]] = field(default_factory=list)
    """(channel, user, text) of every chat.postEphemeral."""
    _limits: dict[str, list[tuple[float, str | None]]] = field(default_factory=dict)
    _failures: dict[str, list[str]] = field(default_factory=dict)
    _runner: web.AppRunner | None = None
    port: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    """What ``files.slack.com`` serves here, by name (``file``): only to the bot token."""
    downloads: list[str] = field(default_factory=list)
    pending_uploads: dict[str, dict[str, Any]] = field(default_factory=dict)
    """files.getUploadURLExternal's file ids, with the bytes once posted to their URL."""
    uploads_received: int = 0
    hang_completes: int = 0
    """The next this-many files.completeUploadExternal share the file, then never answer."""
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by ``stop``: a hung call's handler returns then (its client is gone by now), so the
    server's cleanup does not wait out aiohttp's 60-second shutdown timeout."""

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # uploads: as large as the platform takes
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/socket", self.socket.handle)
        app.router.add_get("/files-pri/{name}", self._file)
        app.router.add_post("/upload/{file_id}", self._upload)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.socket.start()

    async def stop(self) -> None:
        self._stopping.set()
        await self.socket.stop()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    # ------------------------------------------------------------ test controls

    def rate_limit(self, method: str, retry_after: float, times: int = 1, channel: str | None = None) -> None:
        self._limits.setdefault(method, []).extend([(retry_after, channel)] * times)

    def fail(self, method: str, error: str, times: int = 1) -> None:
        self._failures.setdefault(method, []).extend([error] * times)

    def file(self, name: str, data: bytes, mimetype: str) -> dict[str, Any]:
        """A message's file object as Slack sends it, downloadable with the bot token."""
        self.files[name] = data
        url = f"http://127.0.0.1:{self.port}/files-pri/{name}"
        return {"id": f"F{len(self.files):08d}", "name": name, "mimetype": mimetype, "size": len(data),
                "url_private": url, "url_private_download": url}  # fmt: skip

    async def _file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.downloads.append(name)
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            return web.Response(status=403)
        data = self.files.get(name)
        return web.Response(body=data) if data is not None else web.Response(status=404)

    async def _upload(self, request: web.Request) -> web.Response:
        """Step two of the external upload: the bytes, posted to the URL step one answered."""
        pending = self.pending_uploads.get(request.match_info["file_id"])
        if pending is None:
            return web.Response(status=404)
        form = await request.post()
        part = form.get("file")
        data = part.file.read() if isinstance(part, web.FileField) else await request.read()
        if len(data) != pending["length"]:
            return web.Response(status=400, text="length mismatch")
        pending["data"] = data
        self.uploads_received += 1
        return web.Response(text="OK - " + str(len(data)))

    def shared_files(self, channel: str) -> list[Posted]:
        """The channel's messages that share a file, in order."""
        return [m for m in self.view(channel) if m.files]

    async def push_event(self, body: dict[str, Any]) -> Envelope:
        return await self.socket.push("events_api", body)

    async def push_interactive(self, payload: dict[str, Any]) -> Envelope:
        return await self.socket.push("interactive", payload)

    async def push_slash(self, payload: dict[str, Any]) -> Envelope:
        return await self.socket.push("slash_commands", payload)

    def view(self, channel: str) -> list[Posted]:
        return [m for m in self.messages.get(channel, []) if not m.deleted]

    def bot_messages(self) -> list[Posted]:
        return [m for posted in self.messages.values() for m in posted if not m.deleted]

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 30.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or predicate}; {self._story()}")
            await asyncio.sleep(0.01)

    def _story(self, last: int = 20) -> str:
        """What the fake saw, for a timeout's message: the calls so far and unacked envelopes."""
        calls = ", ".join(
            f"{c.method}({c.params.get('channel', '')} {c.params.get('ts', '')}) {c.status}"
            for c in self.calls[-last:]
        )
        unacked = [e.envelope_id for e in self.socket.unacked()]
        return f"{len(self.calls)} calls, the last: [{calls}]; unacked envelopes: {unacked}"

    # ------------------------------------------------------------ the Web API

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        auth = request.headers.get("Authorization", "")
        token = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if auth != f"Bearer {token}":
            return self._answer(method, params, {"ok": False, "error": "invalid_auth"})
        limited = self._limited(method, params)
        if limited is not None:
            self.calls.append(Call(method, params, 429, time.monotonic()))
            headers = {"Retry-After": str(int(limited) if limited == int(limited) else limited)}
            return web.json_response({"ok": False, "error": "ratelimited"}, status=429, headers=headers)
        failures = self._failures.get(method)
        if failures:
            return self._answer(method, params, {"ok": False, "error": failures.pop(0)})
        handler = _HANDLERS.get(method)
        if handler is None:
            return self._answer(method, params, {"ok": False, "error": "unknown_method"})
        answer = handler(self, params)
        if method == "files.completeUploadExternal" and answer.get("ok") and self.hang_completes > 0:
            self.hang_completes -= 1
            await self._stopping.wait()  # shared, never answered (until the server stops)
        return self._answer(method, params, answer)

    def _limited(self, method: str, params: dict[str, Any]) -> float | None:
        queue = self._limits.get(method)
        if not queue:
            return None
        for i, (after, channel) in enumerate(queue):
            if channel is None or channel == params.get("channel"):
                del queue[i]
                return after
        return None

    def _answer(self, method: str, params: dict[str, Any], body: dict[str, Any]) -> web.Response:
        self.calls.append(Call(method, params, 200, time.monotonic()))
        return web.json_response(body)

    def _find(self, channel: str, ts: str) -> Posted | None:
        for m in self.messages.get(channel, []):
            if m.ts == ts and not m.deleted:
                return m
        return None

    def _post(self, p: dict[str, Any], text: str, streaming: bool = False) -> Posted:
        blocks = p.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        posted = Posted(str(p["channel"]), next_ts(), text, p.get("thread_ts"), blocks, streaming=streaming)
        self.messages.setdefault(posted.channel, []).append(posted)
        return posted

    def auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            **{"ok": True, "url": "https://fake.slack.com/", "team": "Fake", "user": "bot"},
            **{"team_id": TEAM, "user_id": BOT_USER, "bot_id": "B0BOT", "is_enterprise_install": False},
        }

    def connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/socket?ticket={self.socket.connects + 1}"}

    def post_message(self, p: dict[str, Any]) -> dict[str, Any]:
        if "channel" not in p:
            return {"ok": False, "error": "channel_not_found"}
        posted = self._post(p, str(p.get("text") or ""))
        return {"ok": True, "channel": posted.channel, "ts": posted.ts, "message": {"text": posted.text}}

    def update(self, p: dict[str, Any]) -> dict[str, Any]:
        posted = self._find(str(p.get("channel")), str(p.get("ts")))
        if posted is None:
            return {"ok": False, "error": "message_not_found"}
        if posted.streaming:
            return {"ok": False, "error": "cant_update_message"}
        posted.text = str(p.get("text") or "")
        blocks = p.get("blocks")
        posted.blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        posted.edits += 1
        return {"ok": True, "channel": posted.channel, "ts": posted.ts, "text": posted.text}

    def delete(self, p: dict[str, Any]) -> dict[str, Any]:
        posted = self._find(str(p.get("channel")), str(p.get("ts")))
        if posted is None:
            return {"ok": False, "error": "message_not_found"}
        posted.deleted = True
        return {"ok": True, "channel": posted.channel, "ts": posted.ts}

    def set_status(self, p: dict[str, Any]) -> dict[str, Any]:
        if "assistant:write" not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": "assistant:write"}
        return {"ok": True}

    def start_stream(self, p: dict[str, Any]) -> dict[str, Any]:
        if not self.streaming:
            return {"ok": False, "error": "unknown_method"}
        if not p.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        in_channel = not str(p.get("channel", "")).startswith("D")
        if in_channel and not (p.get("recipient_user_id") and p.get("recipient_team_id")):
            return {"ok": False, "error": "missing_recipient_user_id"}  # Slack's rule for channels
        posted = self._post(p, str(p.get("markdown_text") or ""), streaming=True)
        return {"ok": True, "channel": posted.channel, "ts": posted.ts}

    def append_stream(self, p: dict[str, Any]) -> dict[str, Any]:
        posted = self._find(str(p.get("channel")), str(p.get("ts")))
        if posted is None or not posted.streaming:
            return {"ok": False, "error": "message_not_in_streaming_state"}
        posted.text += str(p.get("markdown_text") or "")
        posted.edits += 1
        return {"ok": True, "channel": posted.channel, "ts": posted.ts}

    def stop_stream(self, p: dict[str, Any]) -> dict[str, Any]:
        answer = self.append_stream(p)
        if answer["ok"]:
            posted = self._find(str(p.get("channel")), str(p.get("ts")))
            assert posted is not None
            posted.streaming = False
        return answer

    def ephemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        self.ephemerals.append((str(p.get("channel")), str(p.get("user")), str(p.get("text"))))
        return {"ok": True, "message_ts": next_ts()}

    def ok(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    def get_upload_url(self, p: dict[str, Any]) -> dict[str, Any]:
        if not p.get("filename") or not str(p.get("length", "")).isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{len(self.pending_uploads) + 1:08d}UP"
        self.pending_uploads[file_id] = {"name": p["filename"], "length": int(p["length"]), "data": None}
        return {
            "ok": True,
            "upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}",
            "file_id": file_id,
        }

    def complete_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        files = p.get("files")
        files = json.loads(files) if isinstance(files, str) else files
        if not isinstance(files, list) or not files:
            return {"ok": False, "error": "invalid_arguments"}
        shared = []
        for item in files:
            pending = self.pending_uploads.get(str(item.get("id")))
            if pending is None or pending["data"] is None:
                return {"ok": False, "error": "file_not_found"}
            shared.append(
                {"id": item["id"], "title": item.get("title") or pending["name"], "data": pending["data"]}
            )
        if p.get("channel_id"):
            posted = self._post(
                {"channel": p["channel_id"], "thread_ts": p.get("thread_ts")},
                str(p.get("initial_comment") or ""),
            )
            posted.files = shared
        return {"ok": True, "files": [{"id": f["id"], "title": f["title"]} for f in shared]}


async def _params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    raw = await request.read()
    if not raw:
        return params
    if request.content_type == "application/json":
        body = json.loads(raw)
        if isinstance(body, dict):
            params.update(body)
    else:
        params.update(parse_qsl(raw.decode(), keep_blank_values=True))
    return params


_HANDLERS: dict[str, Callable[[FakeSlack, dict[str, Any]], dict[str, Any]]] = {
    "auth.test": FakeSlack.auth_test,
    "apps.connections.open": FakeSlack.connections_open,
    "chat.postMessage": FakeSlack.post_message,
    "files.getUploadURLExternal": FakeSlack.get_upload_url,
    "files.completeUploadExternal": FakeSlack.complete_upload,
    "chat.update": FakeSlack.update,
    "chat.delete": FakeSlack.delete,
    "assistant.threads.setStatus": FakeSlack.set_status,
    "chat.startStream": FakeSlack.start_stream,
    "chat.appendStream": FakeSlack.append_stream,
    "chat.stopStream": FakeSlack.stop_stream,
    "chat.postEphemeral": FakeSlack.ephemeral,
    "reactions.add": FakeSlack.ok,
    "reactions.remove": FakeSlack.ok,
}
