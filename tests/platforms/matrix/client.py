"""A second real Matrix client for the tests: a person (or the admin) speaking the
client-server API to the test's Synapse over plain HTTP, and reading back what the gateway
sent (replies, threads, edits, reactions) from the server itself."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from matrix.homeserver import Account, Synapse


def _p(*parts: str) -> str:
    return "/_matrix/client/v3" + "".join("/" + quote(p, safe="") for p in parts)


class MatrixError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class Person:
    def __init__(self, server: Synapse, account: Account, http: aiohttp.ClientSession) -> None:
        self.server, self.account, self._http = server, account, http
        self.user_id = account.user_id

    async def call(
        self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None
    ) -> Any:
        headers = {"Authorization": f"Bearer {self.account.token}"}
        async with self._http.request(
            method, self.server.base + path, json=body, params=query, headers=headers
        ) as response:
            data = await response.json(content_type=None)
            if response.status >= 300:
                raise MatrixError(response.status, data)
            return data

    async def create_room(
        self,
        *,
        invite: list[str] = (),
        direct: bool = False,
        name: str | None = None,
        encrypted: bool = False,
    ) -> str:  # type: ignore[assignment]
        body: dict[str, Any] = {"invite": list(invite), "is_direct": direct, "preset": "private_chat"}
        if name:
            body["name"] = name
        if encrypted:
            body["initial_state"] = [
                {
                    "type": "m.room.encryption",
                    "state_key": "",
                    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
                }
            ]
        return str((await self.call("POST", _p("createRoom"), body))["room_id"])

    async def invite(self, room: str, user_id: str) -> None:
        await self.call("POST", _p("rooms", room, "invite"), {"user_id": user_id})

    async def join(self, room: str) -> None:
        await self.call("POST", _p("join", room), {})

    async def members(self, room: str) -> set[str]:
        return set((await self.call("GET", _p("rooms", room, "joined_members")))["joined"])

    async def send(self, room: str, content: dict[str, Any], kind: str = "m.room.message") -> str:
        where = _p("rooms", room, "send", kind, uuid.uuid4().hex)
        return str((await self.call("PUT", where, content))["event_id"])

    async def say(
        self, room: str, text: str, *, mention: str | None = None, thread: str | None = None,
        reply_to: str | None = None,
    ) -> str:  # fmt: skip
        content: dict[str, Any] = {"msgtype": "m.text", "body": f"{mention}: {text}" if mention else text}
        if mention:
            content["m.mentions"] = {"user_ids": [mention]}
        if thread:
            content["m.relates_to"] = {
                "rel_type": "m.thread", "event_id": thread, "is_falling_back": reply_to is None,
                "m.in_reply_to": {"event_id": reply_to or thread},
            }  # fmt: skip
        elif reply_to:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return await self.send(room, content)

    async def react(self, room: str, event_id: str, key: str) -> str:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return await self.send(room, content, "m.reaction")

    async def events(self, room: str) -> list[dict[str, Any]]:
        """Every event of the room the server holds, oldest first (paginated)."""
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query = {"dir": "f", "limit": "1000", **({"from": token} if token else {})}
            page = await self.call("GET", _p("rooms", room, "messages"), query=query)
            found.extend(page.get("chunk") or [])
            token = page.get("end")
            if not page.get("chunk") or not token:
                return found


@dataclass(frozen=True, slots=True)
class Shown:
    """One message the bot sent, as a reader sees it now (its latest edit applied)."""

    event_id: str
    text: str
    reply_to: str | None
    thread: str | None
    edits: int
    content: dict[str, Any]


def shown_by(events: list[dict[str, Any]], sender: str) -> list[Shown]:
    """The messages ``sender`` sent, in order, each with its latest ``m.replace`` edit applied."""
    latest: dict[str, str] = {}
    edits: dict[str, int] = {}
    originals = []
    redacted = {
        e.get("redacts") or (e.get("content") or {}).get("redacts")
        for e in events
        if e.get("type") == "m.room.redaction"
    }
    for event in events:
        if event.get("sender") != sender or event.get("type") != "m.room.message":
            continue
        content = event.get("content") or {}
        rel = content.get("m.relates_to") or {}
        if rel.get("rel_type") == "m.replace":
            latest[rel["event_id"]] = (content.get("m.new_content") or {}).get("body", "")
            edits[rel["event_id"]] = edits.get(rel["event_id"], 0) + 1
        elif event["event_id"] not in redacted and content:
            originals.append(event)
    shown = []
    for event in originals:
        content = event["content"]
        rel = content.get("m.relates_to") or {}
        thread = rel.get("event_id") if rel.get("rel_type") == "m.thread" else None
        quoted = (rel.get("m.in_reply_to") or {}).get("event_id")
        if thread and rel.get("is_falling_back"):
            quoted = None
        text = latest.get(event["event_id"], content.get("body", ""))
        shown.append(Shown(event["event_id"], text, quoted, thread, edits.get(event["event_id"], 0), content))
    return shown
