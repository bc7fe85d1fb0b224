"""The API adapter: bearer keys in, requests admitted like any event, answers out of the outbox.

It is an ``Adapter`` and a ``PromptingPlatform`` like the web chat: ``deliver`` and
``draft`` hand a turn's final and drafts to the requests waiting for them, and
``send_prompt`` / ``resolve_prompt`` become approval events in their streams. Nothing
it holds matters after a crash: an answer is read back from the store (``Exchanges``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

import msgspec

from chatgate.domain.api_keys import ApiExchange, ApiKeyRecord, hash_token, token_key_id
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.log_budget import LogBudget
from chatgate.domain.media import FileBody
from chatgate.domain.media_ports import MediaIntake
from chatgate.domain.outbound import Capabilities, Delivered, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.prompts import Prompt, PromptResolution
from chatgate.domain.source import Source
from chatgate.domain.store_roles import ApiKeys, ApprovalReads, Exchanges
from chatgate.engine.ports import (
    WAIT_BRIEFLY,
    AdapterState,
    Admitted,
    Intake,
    Refused,
    Unavailable,
)
from chatgate.platforms.api import shapes
from chatgate.platforms.api.errors import ApiError, unauthorized
from chatgate.platforms.api.files import FileTaker
from chatgate.platforms.api.waiters import Waiters
from chatgate.platforms.kit.trust import vouch

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection

log = logging.getLogger(__name__)
PLATFORM = "api"
ENV_KEY = ApiKeyRecord("env", "key_env", 0.0)
"""The one key of ``key_storage: env``."""
FILE_MAX_BYTES = 100 * 1024 * 1024
"""The largest file the agent may send an API client (served from the blob store by its link)."""
_REFUSED_STATUS = {"unauthorized": 403, "pairing_required": 403, "not_allowed": 403}


class ApiSettings(msgspec.Struct, frozen=True):
    model: str = "chatgate"
    env_token: str | None = None
    """Set for ``key_storage: env``: the only accepted bearer token."""
    max_body_bytes: int = 1024 * 1024
    wait_seconds: float = 600.0
    max_waiting: int = 256
    client_system: str = "append"
    """``append``, ``replace`` or ``ignore`` the client's system messages (``asks.instructions``)."""
    keys: dict[str, tuple[str | None, str | None]] = msgspec.field(default_factory=dict)
    """Key id to its own persona and rule (None: the defaults)."""
    profiles: tuple[str, ...] = ()
    """The model profiles a request's ``model`` may name besides ``model`` (none with one profile)."""
    allow_private_urls: bool = False
    """Fetch an ``image_url`` / ``file_url`` on a private or loopback address (``files.py``)."""


class ApiStore(ApiKeys, Exchanges, ApprovalReads, Protocol):
    """What the API reads itself: keys, what a request became, and a prompt's owner chat."""


def _store_down(exc: StoreUnavailable) -> ApiError:
    return ApiError(503, "storage_unavailable", f"the gateway cannot reach its store ({exc}); retry shortly")


class ApiAdapter:
    """``takes_uploads``: its ``stored`` attachments are files it took in itself (``files.py``)."""

    platform = PLATFORM
    takes_uploads = True
    capabilities = Capabilities(
        drafts=True, buttons=True, max_length=1_000_000, status_lines=False, max_upload_bytes=FILE_MAX_BYTES
    )

    def __init__(
        self, store: ApiStore, intake: Intake, settings: ApiSettings, media: MediaIntake | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.files = FileTaker(media, settings.allow_private_urls)
        self._intake = intake
        self.waiters = Waiters(settings.max_waiting)
        self._intake_open = True
        self.refusals = LogBudget(logging.getLogger("chatgate.platforms.api"))
        """Refused requests' lines (``ApiError.response``): anyone can send a wrong key."""
        self.started = 0
        """When the routes were built (the ``created`` of the model ``GET /v1/models`` lists)."""

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        return None  # the gateway's HTTP server serves the routes

    def stop_intake(self) -> None:
        """Refuse new requests, and end the waiting ones now (the HTTP server stops after the
        outbox flush and would otherwise wait for their streams): each is told how to get its
        answer, which the store keeps whether it arrives before the exit or after the restart."""
        self._intake_open = False
        self.waiters.shut(
            "the gateway is shutting down; fetch the answer with GET /v1/responses/{id} or retry with"
            " the same Idempotency-Key once it is back"
        )

    async def aclose(self, budget: float) -> None:
        return None

    def state(self) -> AdapterState:
        return AdapterState(connected=True, detail=f"{self.waiters.count} API request(s) waiting")

    # ------------------------------------------------------------ outbound

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        """The row is durable already; a request waiting for it is told (nobody waiting is fine:
        the client fetches it later)."""
        if row.kind in ("final", "command"):
            self.waiters.answer(row.chat_id, row.in_reply_to, row.text)
        return Delivered(row.message_id)

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``FilePlatform``: nothing to push. The answer names the file by a link the request's key
        fetches from the blob store (``outfiles.py``); the row only records it went out."""
        return Delivered(row.message_id)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        self.waiters.draft(source.chat_id or "", in_reply_to, text)

    async def send_prompt(self, chat_id: str, prompt: Prompt, target: Mapping[str, str]) -> DeliveryResult:
        """An event in the waiting stream; a client that is not streaming finds it with
        ``GET /v1/responses/{id}`` (the approval record keeps it open)."""
        self.waiters.event(chat_id, {"type": "approval_required", "approval": shapes.approval(prompt)})
        return Delivered(prompt.prompt_id)

    async def resolve_prompt(
        self, chat_id: str, prompt: Prompt, resolution: PromptResolution, target: Mapping[str, str]
    ) -> DeliveryResult:
        event = {
            "type": "approval_resolved",
            "prompt_id": prompt.prompt_id,
            "outcome": resolution.outcome,
            "text": resolution.text,
        }
        self.waiters.event(chat_id, event)
        return Delivered(prompt.prompt_id)

    # ------------------------------------------------------------ inbound

    async def authenticate(self, request: HTTPConnection) -> ApiKeyRecord:
        """The key a request's ``Authorization: Bearer`` names; 401 otherwise (fail closed).

        A valid key vouches for the connection (``platforms.kit.trust``): the HTTP server
        no longer counts it among the strangers' connections it may push out."""
        record = await self._key_for(request.headers.get("authorization"))
        vouch(request)
        return record

    async def _key_for(self, authorization: str | None) -> ApiKeyRecord:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthorized("send your API key as `Authorization: Bearer <key>` (chatgate api-key create)")
        if self.settings.env_token is not None:
            if hmac.compare_digest(token.encode(), self.settings.env_token.encode()):
                return ENV_KEY
            raise unauthorized("the API key is not valid")
        key_id = token_key_id(token)
        if key_id is None:
            raise unauthorized("the API key is not valid (chatgate keys look like cg-<id>-<secret>)")
        try:
            record = await self.store.api_key_by_hash(hash_token(token))
        except StoreUnavailable as exc:
            raise _store_down(exc) from exc
        if record is None or record.key_id != key_id:
            raise unauthorized("the API key is not valid")
        if not record.active:
            raise unauthorized(
                f"the API key {key_id} was revoked; create a new one with chatgate api-key create"
            )
        return record

    async def submit(self, inbound: Inbound) -> Admitted:
        """Admit (committed before any work); the errors say whether to resend."""
        if not self._intake_open:
            raise ApiError(503, "shutting_down", "the gateway is restarting; send this again shortly")
        answer = await self._intake.submit(inbound, patience=WAIT_BRIEFLY)
        if isinstance(answer, Refused):
            raise ApiError(_REFUSED_STATUS.get(answer.code, 400), answer.code, answer.message)
        if isinstance(answer, Unavailable):
            raise ApiError(503, "storage_unavailable", f"{answer.reason}; nothing was saved, send it again")
        return answer

    async def exchange(self, delivery_id: str) -> ApiExchange | None:
        try:
            return await self.store.api_exchange(PLATFORM, delivery_id)
        except StoreUnavailable as exc:
            raise _store_down(exc) from exc
