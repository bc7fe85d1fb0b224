"""The fake's gateway v10: HELLO, IDENTIFY/READY, heartbeats, RESUME with replay, and dispatch.

A ``Session`` outlives its socket, like Discord's: every dispatch gets the session's next
sequence number and is kept, so a RESUME with a session id and a sequence replays what the
client missed, then says RESUMED. A fresh IDENTIFY starts a new session and replays nothing.
Frames are plain JSON text (the client asks for zlib-stream and reads text frames as they are).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from discord_fake.state import APP_ID, BOT, TOKEN

if TYPE_CHECKING:
    from discord_fake.server import FakeDiscord

HEARTBEAT_MS = 41_250
DISPATCH, HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = (
    0,
    1,
    2,
    6,
    7,
    9,
    10,
    11,
)


@dataclass
class Session:
    id: str
    seq: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)
    socket: web.WebSocketResponse | None = None
    intents: int = 0

    def frame(self, event: str, data: Any) -> dict[str, Any]:
        self.seq += 1
        frame = {"op": DISPATCH, "t": event, "s": self.seq, "d": data}
        self.sent.append(frame)
        return frame


class Gateway:
    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.sessions: dict[str, Session] = {}
        self.current: Session | None = None
        self.identifies = 0
        self.resumes = 0
        self.sockets: set[web.WebSocketResponse] = set()
        self.refuse_connections = False
        """While true, a dial is answered 503 (Discord unreachable): what is dispatched meanwhile waits."""
        self.replay_overlap = 0
        """A RESUME also replays this many frames the client had already received (a lagging ack)."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.refuse_connections:
            return web.Response(status=503, text="unavailable")
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        self.sockets.add(ws)
        try:
            await ws.send_str(json.dumps({"op": HELLO, "d": {"heartbeat_interval": HEARTBEAT_MS}}))
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    break
                await self._on_frame(ws, json.loads(msg.data))
        finally:
            self.sockets.discard(ws)
            for session in self.sessions.values():
                if session.socket is ws:
                    session.socket = None
        return ws

    async def _on_frame(self, ws: web.WebSocketResponse, frame: dict[str, Any]) -> None:
        op, data = frame.get("op"), frame.get("d")
        if op == HEARTBEAT:
            await ws.send_str(json.dumps({"op": HEARTBEAT_ACK}))
        elif op == IDENTIFY:
            await self._identify(ws, data)
        elif op == RESUME:
            await self._resume(ws, data)

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        if data.get("token") != TOKEN:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        self.identifies += 1
        session = Session(uuid.uuid4().hex, socket=ws, intents=int(data.get("intents") or 0))
        self.sessions[session.id] = session
        self.current = session
        ready = {
            "v": 10, "user": BOT.wire(), "session_id": session.id, "session_type": "normal",
            "resume_gateway_url": self.fake.ws_url, "application": {"id": APP_ID, "flags": 0},
            "guilds": [{"id": g.id, "unavailable": True} for g in self.fake.guilds.values()],
            "private_channels": [], "relationships": [], "presences": [],
        }  # fmt: skip
        await ws.send_str(json.dumps(session.frame("READY", ready)))
        for guild in self.fake.guilds.values():
            await ws.send_str(json.dumps(session.frame("GUILD_CREATE", guild.wire())))

    async def _resume(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        session = self.sessions.get(str(data.get("session_id")))
        if data.get("token") != TOKEN or session is None or self.fake.refuse_resume:
            await ws.send_str(json.dumps({"op": INVALID_SESSION, "d": False}))
            return
        self.resumes += 1
        session.socket = ws
        self.current = session
        after = max(0, int(data.get("seq") or 0) - self.replay_overlap)
        for frame in [f for f in session.sent if f["s"] > after and f["t"] not in ("READY", "RESUMED")]:
            await ws.send_str(json.dumps(frame))
        await ws.send_str(json.dumps(session.frame("RESUMED", {})))

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send to the current session; kept for a RESUME when its socket is gone right now."""
        session = self.current
        if session is None:
            return
        frame = session.frame(event, data)
        if session.socket is not None and not session.socket.closed:
            try:
                await session.socket.send_str(json.dumps(frame))
            except (ConnectionError, RuntimeError):
                session.socket = None

    async def drop(self, *, code: int = 4000) -> None:
        """Close every socket without a RECONNECT (a network drop): the client RESUMEs."""
        for ws in list(self.sockets):
            await ws.close(code=code)

    async def reconnect(self) -> None:
        for ws in list(self.sockets):
            await ws.send_str(json.dumps({"op": RECONNECT, "d": None}))

    async def invalidate(self) -> None:
        self.fake.refuse_resume = True
        for ws in list(self.sockets):
            await ws.send_str(json.dumps({"op": INVALID_SESSION, "d": False}))

    def forget_sessions(self) -> None:
        """Discord forgets a session some time after its client went away (a process restart)."""
        self.sessions.clear()
        self.current = None

    async def close(self) -> None:
        for ws in list(self.sockets):
            await ws.close(code=1001)
        await asyncio.sleep(0)
