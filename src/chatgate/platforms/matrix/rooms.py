"""What the adapter knows of its rooms: members, names, topics, encryption, display names.

Learned from each /sync answer's state and timeline events, and for a room first seen in
this process read once from the homeserver (its joined members and name, topic and
encryption state), so a restart that syncs from a stored token (which repeats no state)
still knows a DM from a group. Bounded: at most ``MAX_ROOMS`` rooms and ``MAX_NAMES`` display
names per room are kept; a forgotten room is read again when it speaks.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from msgspec.structs import replace

from chatgate.domain.errors import PlatformCallError
from chatgate.platforms.matrix.decode import RoomInfo
from chatgate.platforms.matrix.errors import ApiRefused

log = logging.getLogger(__name__)
MAX_ROOMS = 4096
MAX_NAMES = 256
Call = Callable[..., Awaitable[dict[str, Any]]]


def _text(content: Any, key: str) -> str | None:
    value = content.get(key) if isinstance(content, dict) else None
    return value.strip()[:200] or None if isinstance(value, str) else None


class Rooms:
    def __init__(self, call: Call) -> None:
        self._call = call
        self._rooms: OrderedDict[str, RoomInfo] = OrderedDict()
        self._names: dict[str, OrderedDict[str, str]] = {}
        self.direct: set[str] = set()
        """Rooms the bot was invited to as a DM (``is_direct``), this process."""

    def _keep(self, info: RoomInfo) -> RoomInfo:
        self._rooms[info.room_id] = info
        self._rooms.move_to_end(info.room_id)
        while len(self._rooms) > MAX_ROOMS:
            gone, _ = self._rooms.popitem(last=False)
            self._names.pop(gone, None)
        return info

    def forget(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)
        self._names.pop(room_id, None)

    def name_of(self, room_id: str, user_id: str) -> str | None:
        names = self._names.get(room_id)
        return names.get(user_id) if names is not None else None

    def _name(self, room_id: str, user_id: str, name: str | None) -> None:
        names = self._names.setdefault(room_id, OrderedDict())
        if name:
            names[user_id] = name
            while len(names) > MAX_NAMES:
                names.popitem(last=False)

    async def info(self, room_id: str) -> RoomInfo:
        """The room as known, read from the homeserver the first time."""
        found = self._rooms.get(room_id)
        if found is not None:
            return replace(found, direct=room_id in self.direct)
        return self._keep(await self._read(room_id))

    async def _read(self, room_id: str) -> RoomInfo:
        from chatgate.platforms.matrix.api import path  # aiohttp: loaded once the adapter starts

        members = 0
        try:
            joined = await self._call("GET", path("rooms", room_id, "joined_members"))
            people = joined.get("joined")
            members = len(people) if isinstance(people, dict) else 0
            for user, about in (people or {}).items():
                self._name(room_id, str(user), _text(about, "display_name"))
        except PlatformCallError as exc:
            log.warning("could not read the members of Matrix room %s: %s", room_id, exc)
        state = {}
        for kind, key in (
            ("m.room.name", "name"),
            ("m.room.topic", "topic"),
            ("m.room.encryption", "algorithm"),
        ):
            try:
                state[kind] = _text(await self._call("GET", path("rooms", room_id, "state", kind, "")), key)
            except ApiRefused as exc:
                if exc.status != 404:
                    log.info("could not read %s of Matrix room %s: %s", kind, room_id, exc)
            except PlatformCallError as exc:
                log.info("could not read %s of Matrix room %s: %s", kind, room_id, exc)
        return RoomInfo(
            room_id, members, state.get("m.room.name"), state.get("m.room.topic"),
            encrypted=bool(state.get("m.room.encryption")), direct=room_id in self.direct,
        )  # fmt: skip

    def observe(self, room_id: str, events: list[dict[str, Any]], joined_count: int | None) -> None:
        """State seen in a sync answer (``state`` and ``timeline``) updates what is known."""
        info = self._rooms.get(room_id)
        if info is None:
            for event in events:  # names are worth keeping even before the room is read
                if event.get("type") == "m.room.member" and isinstance(event.get("state_key"), str):
                    self._name(room_id, event["state_key"], _text(event.get("content"), "displayname"))
            return
        for event in events:
            kind, content = event.get("type"), event.get("content")
            if kind == "m.room.name":
                info = replace(info, name=_text(content, "name"))
            elif kind == "m.room.topic":
                info = replace(info, topic=_text(content, "topic"))
            elif kind == "m.room.encryption":
                info = replace(info, encrypted=True)
            elif kind == "m.room.member" and isinstance(event.get("state_key"), str):
                self._name(room_id, event["state_key"], _text(content, "displayname"))
        if joined_count is not None:
            info = replace(info, members=joined_count)
        self._keep(info)
