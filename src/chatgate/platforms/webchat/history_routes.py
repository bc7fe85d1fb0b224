"""A person's conversations: the list (with search), one conversation's history (paged),
renaming, deleting and exporting. Each conversation is read only by its owner: the signed-in
account with accounts, else the browser that opened it (``owners.py``)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.outfiles import OutFile
from chatgate.domain.store_roles import WebChats
from chatgate.domain.tool_steps import as_json as steps_json
from chatgate.domain.web_chats import DELETED_OWNER, MAX_HISTORY_PAGE, MAX_LIST, MAX_QUERY_CHARS, HistoryItem
from chatgate.platforms.webchat.account_routes import error
from chatgate.platforms.webchat.bodies import BodyError, Rename, read_body
from chatgate.platforms.webchat.exports import MAX_EXPORT_ITEMS, as_json, as_markdown
from chatgate.platforms.webchat.heavy_reads import HeavyReads, TooManyReads
from chatgate.platforms.webchat.owners import ChatOwners, Owner
from chatgate.platforms.webchat.session_gate import Refusal

log = logging.getLogger(__name__)
PLATFORM = "web"
DEFAULT_PAGE = 100


FileLink = Callable[[str, OutFile], str]


def _item(item: HistoryItem, chat_id: str = "", link: FileLink | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": item.kind, "id": item.id, "text": item.text, "at": item.at}
    if item.file is not None and link is not None:  # the agent's file, linked as its live frame was
        file = item.file
        out["file"] = {"name": file.name, "mime": file.mime, "size": file.size, "url": link(chat_id, file)}
    if item.in_reply_to is not None:
        out["in_reply_to"] = item.in_reply_to
    if item.outcome is not None:
        out["outcome"] = item.outcome
    if item.steps:
        out["steps"] = steps_json(item.steps)
    if item.regenerates is not None:
        out["regenerates"] = item.regenerates
    return out


def _bounded_int(raw: str | None, default: int, top: int) -> int | Refusal:
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= top:
        return Refusal(400, "invalid_request", f"limit must be a whole number from 1 to {top}")
    return int(raw)


def _before(raw: str | None) -> float | Refusal | None:
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        return Refusal(400, "invalid_request", "before must be a time (the at of the oldest item you have)")
    return value


class HistoryDesk:
    def __init__(
        self,
        store: WebChats,
        owners: ChatOwners,
        reads: HeavyReads | None = None,
        link: FileLink | None = None,
    ) -> None:
        self.link = link
        """Signs the download link of a file the agent sent (``uploads.UploadSigner.file_link``)."""
        self.store = store
        self.owners = owners
        self.reads = reads or HeavyReads()
        """Each user's lists, searches, pages and exports one at a time (issue 27, finding 7)."""

    async def _owned(self, request: Request, who: Owner) -> str | Refusal:
        chat_id = str(request.path_params["chat_id"])
        if not 1 <= len(chat_id) <= 200:
            return Refusal(400, "invalid_request", "a conversation id has 1 to 200 characters")
        owner = await self.store.chat_owner(PLATFORM, chat_id)
        if owner is None or owner == DELETED_OWNER:
            return Refusal(404, "not_found", "no such conversation")
        if owner != who.user_id:
            refusal = Refusal(403, "forbidden", "this conversation belongs to another user")
            log.warning(
                "web chat: %s asked for conversation %s of another user",
                who.name,
                chat_id,
                extra={"code": "forbidden", "chat_id": chat_id, "user_id": who.user_id},
            )
            return refusal
        return chat_id

    async def conversations(self, request: Request) -> Response:
        found = await self.owners.reader(request)
        if isinstance(found, Refusal):
            return error(found)
        query = request.query_params.get("q", "").strip()
        limit = _bounded_int(request.query_params.get("limit"), 50, MAX_LIST)
        if isinstance(limit, Refusal):
            return error(limit)
        if len(query) > MAX_QUERY_CHARS:
            return error(Refusal(400, "invalid_request", f"q has more than {MAX_QUERY_CHARS} characters"))
        try:
            async with self.reads.hold(found.user_id, search=bool(query)):
                chats = await self.store.list_chats(PLATFORM, found.user_id, query or None, limit)
        except TooManyReads as exc:
            return error(Refusal(429, "too_many_requests", f"{exc}; wait for them before asking again"))
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not list conversations: {exc}"))
        return JSONResponse(
            {
                "conversations": [
                    {
                        "id": c.chat_id,
                        "title": c.title,
                        "created_at": c.created_at,
                        "last_activity": c.last_activity,
                    }
                    for c in chats
                ]
            }
        )

    async def messages(self, request: Request) -> Response:
        found = await self.owners.reader(request)
        if isinstance(found, Refusal):
            return error(found)
        limit = _bounded_int(request.query_params.get("limit"), DEFAULT_PAGE, MAX_HISTORY_PAGE)
        before = _before(request.query_params.get("before"))
        for bad in (limit, before):
            if isinstance(bad, Refusal):
                return error(bad)
        assert isinstance(limit, int) and not isinstance(before, Refusal)
        try:
            chat_id = await self._owned(request, found)
            if isinstance(chat_id, Refusal):
                return error(chat_id)
            async with self.reads.hold(found.user_id):
                items = await self.store.chat_history(PLATFORM, chat_id, before, limit + 1)
        except TooManyReads as exc:
            return error(Refusal(429, "too_many_requests", f"{exc}; wait for them before asking again"))
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not read the conversation: {exc}"))
        more = len(items) > limit
        page = items[-limit:]
        return JSONResponse(
            {
                "id": chat_id,
                "items": [_item(i, chat_id, self.link) for i in page],
                "before": page[0].at if more and page else None,
            }
        )

    async def rename(self, request: Request) -> Response:
        found = await self.owners.changer(request)
        if isinstance(found, Refusal):
            return error(found)
        try:
            body = await read_body(request, Rename)
            chat_id = await self._owned(request, found)
            if isinstance(chat_id, Refusal):
                return error(chat_id)
            await self.store.set_chat_title(PLATFORM, chat_id, body.title, replace=True)
        except BodyError as exc:
            return error(Refusal(400, exc.code, exc.message))
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not rename: {exc}; try again"))
        return JSONResponse({"id": chat_id, "title": body.title})

    async def delete(self, request: Request) -> Response:
        found = await self.owners.changer(request)
        if isinstance(found, Refusal):
            return error(found)
        try:
            chat_id = await self._owned(request, found)
            if isinstance(chat_id, Refusal):
                return error(chat_id)
            await self.store.delete_chat(PLATFORM, chat_id)
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not delete: {exc}; try again"))
        log.info("web chat: %s deleted conversation %s", found.name, chat_id, extra={"chat_id": chat_id})
        return JSONResponse({"id": chat_id, "deleted": True})

    async def export(self, request: Request) -> Response:
        """The whole conversation (up to ``MAX_EXPORT_ITEMS`` newest items) as a download."""
        found = await self.owners.reader(request)
        if isinstance(found, Refusal):
            return error(found)
        kind = request.query_params.get("format", "md")
        if kind not in ("md", "json"):
            return error(Refusal(400, "invalid_request", "format must be md or json"))
        try:
            chat_id = await self._owned(request, found)
            if isinstance(chat_id, Refusal):
                return error(chat_id)
            async with self.reads.hold(found.user_id):
                items = await self._everything(chat_id)
                title = next(
                    (
                        c.title
                        for c in await self.store.list_chats(PLATFORM, found.user_id, None, MAX_LIST)
                        if c.chat_id == chat_id
                    ),
                    None,
                )
        except TooManyReads as exc:
            return error(Refusal(429, "too_many_requests", f"{exc}; wait for them before asking again"))
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not export: {exc}; try again"))
        body, media = as_markdown(title, items) if kind == "md" else as_json(chat_id, title, items)
        name = f"conversation-{chat_id[:40]}.{kind}"
        return Response(
            body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'}
        )

    async def _everything(self, chat_id: str) -> list[HistoryItem]:
        items: list[HistoryItem] = []
        before: float | None = None
        while len(items) < MAX_EXPORT_ITEMS:
            page = await self.store.chat_history(PLATFORM, chat_id, before, MAX_HISTORY_PAGE)
            items[:0] = page
            if len(page) < MAX_HISTORY_PAGE:
                break
            before = page[0].at
        return items[-MAX_EXPORT_ITEMS:]


def history_routes(desk: HistoryDesk) -> list[BaseRoute]:
    return [
        Route("/api/conversations", desk.conversations, methods=["GET"]),
        Route("/api/conversations/{chat_id}/messages", desk.messages, methods=["GET"]),
        Route("/api/conversations/{chat_id}/title", desk.rename, methods=["POST"]),
        Route("/api/conversations/{chat_id}/delete", desk.delete, methods=["POST"]),
        Route("/api/conversations/{chat_id}/export", desk.export, methods=["GET"]),
    ]
