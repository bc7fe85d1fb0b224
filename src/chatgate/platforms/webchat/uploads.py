"""Files a person uploads into a web chat conversation (docs/media.md, docs/webchat-protocol.md).

``POST /api/conversations/{chat_id}/uploads?name=<file name>`` with the file as the body: only
the conversation's owner may (``owners.py``, with a change's cross-site checks). The body
streams into the engine's ``MediaIntake`` (bounded, checked by its content, stored by sha256),
and the answer is a signed ``ref``. A message frame then names it in ``attachments``; the
adapter admits it only when the signature is this gateway's for that very conversation, so
a page cannot attach another conversation's file, nor claim a type or size it does not have.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Sequence
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Attachment
from chatgate.domain.media import MediaItem, MediaRefused, sanitize_name
from chatgate.domain.media_ports import MediaIntake
from chatgate.domain.outfiles import OutFile
from chatgate.domain.store_roles import WebChats
from chatgate.domain.web_chats import DELETED_OWNER
from chatgate.platforms.kit.downloads import download_response
from chatgate.platforms.webchat.account_routes import error
from chatgate.platforms.webchat.owners import ChatOwners
from chatgate.platforms.webchat.protocol import Upload
from chatgate.platforms.webchat.session_gate import Refusal

log = logging.getLogger(__name__)
PLATFORM = "web"
STORED = "stored"
"""The attachment kind of a file already in the blob store (``engine.media_fetch.STORED``)."""
MAX_ATTACHMENTS = 10


KEY_NAME = "web-uploads"
"""The store's shared key (``Media.shared_key``) that signs uploads and file links."""


class UploadSigner:
    """Signs what an upload stored, for one conversation; checks a message's refs against it.

    The key is the store's (``MediaIntake.signing_key``): made once, the same for every process
    of a fleet and across restarts, so a ref signed by one process is good on any other, and a
    file link outlives a restart. ``load`` reads it (at the gateway's start); until then nothing
    is signed and no ref is accepted (fail closed). A ``key`` given is used as is (tests)."""

    def __init__(self, key: bytes | None = None, source: MediaIntake | None = None) -> None:
        self._key = key
        self._source = source

    async def load(self) -> None:
        if self._key is None and self._source is not None:
            self._key = await self._source.signing_key(KEY_NAME)

    async def preflight(self) -> str | None:
        """The gateway's start, after the store opened and before anything is served: the key."""
        await self.load()
        return None

    def _mac(self, chat_id: str, body: str) -> str:
        if self._key is None:
            raise StoreUnavailable("the upload signing key is not loaded yet")
        return hmac.new(self._key, f"{chat_id}\n{body}".encode(), hashlib.sha256).hexdigest()[:32]

    def sign(self, chat_id: str, item: MediaItem) -> str:
        body = f"{item.sha}:{item.size}:{item.mime}"
        return f"{body}:{self._mac(chat_id, body)}"

    def file_link(self, chat_id: str, file: OutFile) -> str:
        """The download link of a file the agent sent to ``chat_id``: its sha, name and type signed
        for that conversation, so the link opens that file there and nothing else."""
        query = urlencode({"name": file.name, "mime": file.mime})
        sig = self._mac(chat_id, f"file:{file.sha}:{query}")
        return f"/api/conversations/{quote(chat_id, safe='')}/files/{file.sha}?{query}&sig={sig}"

    def check_link(self, chat_id: str, sha: str, name: str, mime: str, sig: str) -> bool:
        query = urlencode({"name": name, "mime": mime})
        return hmac.compare_digest(sig, self._mac(chat_id, f"file:{sha}:{query}"))

    def attachment(self, chat_id: str, ref: str, name: str) -> Attachment | None:
        """The stored file ``ref`` names, when this gateway signed it for ``chat_id``; else None."""
        body, _, mac = ref.rpartition(":")
        parts = body.split(":")
        if self._key is None or len(parts) != 3 or not hmac.compare_digest(mac, self._mac(chat_id, body)):
            return None
        sha, size, mime = parts
        return Attachment(STORED, sha, mime, sanitize_name(name), int(size))


def message_files(
    signer: UploadSigner | None, chat_id: str, uploads: Sequence[Upload]
) -> tuple[Attachment, ...] | None:
    """A message's uploads, each checked against its conversation (None: one is not ours)."""
    found = [signer.attachment(chat_id, u.ref, u.name) if signer is not None else None for u in uploads]
    return None if None in found else tuple(a for a in found if a is not None)


class UploadDesk:
    def __init__(self, store: WebChats, owners: ChatOwners, media: MediaIntake, signer: UploadSigner) -> None:
        self.store = store
        self.owners = owners
        self.media = media
        self.signer = signer

    async def upload(self, request: Request) -> Response:
        who = await self.owners.changer(request)
        if isinstance(who, Refusal):
            return error(who)
        chat_id = str(request.path_params["chat_id"])
        try:
            owner = await self.store.chat_owner(PLATFORM, chat_id)
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not check the conversation: {exc}"))
        if owner is None or owner == DELETED_OWNER or owner != who.user_id:
            return error(Refusal(404, "not_found", "no such conversation of yours (say hello on it first)"))
        name = sanitize_name(request.query_params.get("name"), "upload")
        try:
            await self.signer.load()
            item = await self.media.take(request.stream(), PLATFORM, name, f"{PLATFORM}:{who.user_id}")
        except MediaRefused as exc:
            log.info("web chat upload refused: %s", exc, extra={"chat_id": chat_id, "code": "refused"})
            return error(Refusal(422, "file_refused", f"{name} was not accepted: {exc}"))
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"the file could not be stored: {exc}"))
        ref = self.signer.sign(chat_id, item)
        return JSONResponse({"ref": ref, "name": item.name, "mime": item.mime, "size": item.size})

    async def download(self, request: Request) -> Response:
        """A file the agent sent: only for the conversation's owner, with a link signed for it;
        always a download (``attachment``, ``nosniff``, a sandbox CSP), never rendered inline."""
        who = await self.owners.reader(request)
        if isinstance(who, Refusal):
            return error(who)
        chat_id, sha = str(request.path_params["chat_id"]), str(request.path_params["sha"])
        params = request.query_params
        name, mime, sig = params.get("name", ""), params.get("mime", ""), params.get("sig", "")
        try:
            owner = await self.store.chat_owner(PLATFORM, chat_id)
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not check the conversation: {exc}"))
        gone = Refusal(
            404, "not_found", "no such file in a conversation of yours (the link may have expired)"
        )
        if owner is None or owner == DELETED_OWNER or owner != who.user_id:
            return error(gone)
        try:
            await self.signer.load()
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"could not check the link: {exc}"))
        if not self.signer.check_link(chat_id, sha, name, mime, sig):
            return error(gone)
        try:
            blob = await self.media.open_blob(sha)
        except StoreUnavailable as exc:
            return error(Refusal(503, "storage_unavailable", f"the file could not be read: {exc}"))
        if blob is None:
            return error(Refusal(404, "not_found", "the file is no longer stored"))
        return download_response(blob, name, mime)


def upload_routes(desk: UploadDesk) -> list[BaseRoute]:
    return [
        Route("/api/conversations/{chat_id}/uploads", desk.upload, methods=["POST"]),
        Route("/api/conversations/{chat_id}/files/{sha}", desk.download, methods=["GET"]),
    ]
