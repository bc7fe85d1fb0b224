"""The signed-in user's conversations: the list (with search), one conversation's history
(paged), and renaming. Each conversation is read only by the account that owns it."""

from __future__ import annotations

import logging
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chatgate.domain.accounts import SignedIn
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.store_roles import WebChats
from chatgate.domain.web_chats import MAX_HISTORY_PAGE, MAX_LIST, MAX_QUERY_CHARS, HistoryItem
from chatgate.platforms.webchat.account_routes import error
from chatgate.platforms.webchat.bodies import BodyError, Rename, read_body
from chatgate.platforms.webchat.session_gate import Refusal, SessionGate

log = logging.getLogger(__name__)
PLATFORM = "web"
DEFAULT_PAGE = 100


def _item(item: HistoryItem) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": item.kind, "id": item.id, "text": item.text, "at": item.at}
    if item.in_reply_to is not None:
        out["in_reply_to"] = item.in_reply_to
    if item.outcome is not None:
        out["outcome"] = item.outcome
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
    def __init__(self, store: WebChats, gate: SessionGate) -> None:
        self.store = store
        self.gate = gate

    async def _owned(self, request: Request, found: SignedIn) -> str | Refusal:
        chat_id = str(request.path_params["chat_id"])
        if not 1 <= len(chat_id) <= 200:
            return Refusal(400, "invalid_request", "a conversation id has 1 to 200 characters")
        owner = await self.store.chat_owner(PLATFORM, chat_id)
        if owner is None:
            return Refusal(404, "not_found", "no such conversation")
        if owner != found.account.user_id:
            refusal = Refusal(403, "forbidden", "this conversation belongs to another user")
            log.warning(
                "web chat: %s asked for conversation %s of another user",
                found.account.name,
                chat_id,
                extra={"code": "forbidden", "chat_id": chat_id, "user_id": found.account.user_id},
            )
            return refusal
        return chat_id

    async def conversations(self, request: Request) -> Response:
        found = await self.gate.signed_in(request)
        if isinstance(found, Refusal):
            return error(found)
        query = request.query_params.get("q", "").strip()
        limit = _bounded_int(request.query_params.get("limit"), 50, MAX_LIST)
        if isinstance(limit, Refusal):
            return error(limit)
        if len(query) > MAX_QUERY_CHARS:
            return error(Refusal(400, "invalid_request", f"q has more than {MAX_QUERY_CHARS} characters"))
        try:
            chats = await self.store.list_chats(PLATFORM, found.account.user_id, query or None, limit)
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
        found = await self.gate.signed_in(request)
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
            items = await self.store.chat_history(PLATFORM, chat_id, before, limit + 1)
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not read the conversation: {exc}"))
        more = len(items) > limit
        page = items[-limit:]
        return JSONResponse(
            {
                "id": chat_id,
                "items": [_item(i) for i in page],
                "before": page[0].at if more and page else None,
            }
        )

    async def rename(self, request: Request) -> Response:
        found = await self.gate.for_change(request)
        if isinstance(found, Refusal):
            self.gate.refused(request, found, "rename")
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


def history_routes(desk: HistoryDesk) -> list[BaseRoute]:
    return [
        Route("/api/conversations", desk.conversations, methods=["GET"]),
        Route("/api/conversations/{chat_id}/messages", desk.messages, methods=["GET"]),
        Route("/api/conversations/{chat_id}/title", desk.rename, methods=["POST"]),
    ]
