"""The native Matrix adapter: /sync in, edits, threads and reaction prompts out.

Inbound: ``SyncLoop`` long-polls ``/sync``, ``MatrixLane`` admits each answer's events
(rooms concurrently, each room in order) and only then is ``next_batch`` stored: a
restart syncs from the stored token and so answers what arrived while it was down, once.

Outbound: ``MatrixOutbound`` implements the ``EditablePlatform`` operations the stream
consumer uses for previews (an edit is an ``m.replace`` event); ``deliver`` puts an outbox
row on Matrix through ``engine.ports.deliver_final`` (the preview edited into the final), in
a transaction of the row's own so the homeserver deduplicates a resend.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from chatgate.domain.errors import NotSent, PlatformCallError, StoreUnavailable
from chatgate.domain.inbound import Attachment
from chatgate.domain.media import FileBody, human_size
from chatgate.domain.outbound import Capabilities, DeliveryResult, Rejected, RetryLater
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.outfiles import OutFile
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Cursors
from chatgate.engine.ports import AdapterState, Intake, deliver_final
from chatgate.platforms.kit.forwarding import ForwardsToOutbound
from chatgate.platforms.matrix.decode import PLATFORM, Addressing
from chatgate.platforms.matrix.dimensions import image_dimensions
from chatgate.platforms.matrix.errors import ApiRefused
from chatgate.platforms.matrix.lane import JoinPolicy, MatrixLane
from chatgate.platforms.matrix.outbound import MatrixOutbound, classify, row_transaction
from chatgate.platforms.matrix.rooms import Rooms
from chatgate.platforms.matrix.section import MatrixSection
from chatgate.platforms.matrix.signin import SignedIn, sign_in
from chatgate.platforms.matrix.sync import SyncLoop

if TYPE_CHECKING:
    from chatgate.platforms.matrix.api import MatrixApi

log = logging.getLogger(__name__)
STOP_BUDGET = 10.0
FILE_MAX_BYTES = 50 * 1024 * 1024
"""Synapse's default ``max_upload_size``, until the homeserver's own ``m.upload.size`` is read at
sign-in; a file over the homeserver's limit is refused with 413 (``Rejected``)."""


class MatrixAdapter(ForwardsToOutbound[MatrixOutbound]):
    platform = PLATFORM
    capabilities = Capabilities(
        edit=True,
        buttons=True,  # reactions under the prompt (prompts.py)
        threads=True,
        # A whole event is at most 64 KiB, and an edit carries its text twice (``body`` and
        # ``m.new_content``): 4,000 characters fit even when JSON escapes every one.
        max_length=4000,
        length_unit="chars",
        markdown="plain",
        typing=True,
        edit_interval=1.0,
        # Homeservers limit a user's messages (Synapse: rc_message); M_LIMIT_EXCEEDED's
        # retry_after_ms pauses the platform, so no rate is guessed here.
        chat_min_interval=0.2,
        max_upload_bytes=FILE_MAX_BYTES,
    )

    def __init__(
        self,
        section: MatrixSection,
        secret: str,
        cursors: Cursors,
        intake: Intake,
        *,
        duplicate_marker: str = "",
    ) -> None:
        self._section = section
        self._secret = secret
        self._cursors = cursors
        self._duplicate_marker = duplicate_marker
        self._api: MatrixApi | None = None
        self.user_id = section.user_id
        self._signed: SignedIn | None = None
        self._signing = asyncio.Lock()
        self._outbound = MatrixOutbound(self._call, lambda: self.user_id)
        self.rooms = Rooms(self._call)
        policy = JoinPolicy(
            section.auto_join, section.allow_all, section.pairing, frozenset(section.allow_users)
        )
        self.lane = MatrixLane(intake, self._call, self.rooms, self._outbound, policy)
        self.sync: SyncLoop | None = None
        self._guard: Callable[[], Awaitable[bool]] | None = None
        self._connected = False
        self._detail = "not started"

    async def _ready(self) -> MatrixApi:
        """The API, signed in (once; a failure raises and the next call tries again)."""
        api = self._api
        if api is None:
            raise NotSent("the Matrix adapter is not started")
        if self._signed is None:
            async with self._signing:
                if self._signed is None:
                    signed = await sign_in(api, self._section, self._secret, self._cursors)
                    self.user_id = signed.user_id
                    section = self._section
                    self.lane.rules = Addressing(
                        signed.user_id, signed.display_name, section.require_mention,
                        frozenset(section.free_response_rooms),
                    )  # fmt: skip
                    await self._take_upload_limit(api)
                    self._signed = signed
        return api

    async def _take_upload_limit(self, api: MatrixApi) -> None:
        """The homeserver's own upload limit replaces the default, so a file over it becomes the
        refusal line when the turn is recorded (a file far over it would have its upload cut
        off mid-request, an answerless failure retried for nothing)."""
        limit = await api.upload_limit()
        if limit is not None:
            self.capabilities = msgspec.structs.replace(type(self).capabilities, max_upload_bytes=limit)
            log.info("Matrix: the homeserver takes uploads up to %s", human_size(limit))

    async def _call(self, method: str, where: str, body: Any = None, **options: Any) -> dict[str, Any]:
        return await (await self._ready()).call(method, where, body, **options)

    async def _connect(self) -> str:
        """The sync loop's first step: sign in; the name of the account's sync token."""
        await self._ready()
        return f"matrix:{self.user_id}:next_batch"

    # ------------------------------------------------------------ lifecycle

    def _open(self) -> None:
        from chatgate.platforms.matrix.api import MatrixApi  # aiohttp, once this process holds the lock

        if self._api is None:
            self._api = MatrixApi(self._section.homeserver)
        if self.sync is None:
            section = self._section
            self.sync = SyncLoop(
                self._call, self._cursors, self._connect, self.lane.admit_batch,
                timeout=section.sync_timeout_seconds, timeline_limit=section.timeline_limit,
                max_catch_up=section.max_catch_up_events, on_state=self._set_state,
            )  # fmt: skip
            self.sync.guard = self._guard

    async def start(self) -> None:
        """Sync (again, after a fleet standby took over: from the stored token). Signing in is the
        sync loop's first step, retried with backoff: a homeserver that is down delays Matrix
        only, and the gateway starts."""
        self._open()
        assert self.sync is not None
        self._detail = "signing in"
        await self.sync.wait_stopped(STOP_BUDGET)  # a sync stopped by a lost fleet lock has ended
        self.sync.start()

    async def start_sending(self) -> None:
        """A fleet's standby: send replies and edit previews, but leave /sync to the process that
        holds the account's lock (two would admit, and answer, the same events)."""
        self._open()
        try:
            await self._ready()
        except (PlatformCallError, StoreUnavailable) as exc:
            log.warning("Matrix: could not sign in yet (the first send tries again): %s", exc)
        self._set_state(True, "standby: another process of the fleet syncs")

    def stop_polling(self) -> None:
        """Back to standby (the fleet lock was lost): the sync in flight is abandoned, the batch
        being admitted finishes and stores its token; sending goes on."""
        if self.sync is not None:
            self.sync.stop()
        self._set_state(True, "standby: another process of the fleet syncs")

    def set_poll_guard(self, guard: Callable[[], Awaitable[bool]]) -> None:
        """Ask ``guard`` before every /sync; False stops syncing (the fleet's lock is gone)."""
        self._guard = guard
        if self.sync is not None:
            self.sync.guard = guard

    def stop_intake(self) -> None:
        self.lane.accepting = False
        if self.sync is not None:
            self.sync.stop()

    async def aclose(self, budget: float = 5.0) -> None:
        """After ``stop_intake`` and the outbox flush (or a start that raised): end syncing and
        close the HTTP session; idempotent."""
        self.lane.accepting = False
        if self.sync is not None:
            self.sync.stop()
            await self.sync.wait_stopped(min(budget, STOP_BUDGET))
            self.sync = None
        if self._api is not None:
            await self._api.aclose()
            self._api = None
        self._connected = False
        self._detail = "stopped"

    def state(self) -> AdapterState:
        return AdapterState(self._connected, self._detail)

    def _set_state(self, connected: bool, detail: str) -> None:
        self._connected = connected
        self._detail = f"{self.user_id}: {detail}"

    # ------------------------------------------------------------ outbound

    async def deliver(self, row: OutboxRow) -> DeliveryResult:
        try:
            await self._ready()  # the row's transaction ids need this store's namespace
        except (PlatformCallError, StoreUnavailable) as exc:
            return RetryLater(f"not signed in to Matrix yet: {exc}", 5.0)
        assert self._signed is not None
        with row_transaction(f"{self._signed.namespace}.o{row.id}"):
            return await deliver_final(self, row, self._duplicate_marker)

    async def send_file(self, row: OutboxRow, file: OutFile, body: FileBody, caption: str) -> DeliveryResult:
        """``FilePlatform``: the file into the media repository, then its event under the row's
        transaction id (a resend after a crash is the same event; the upload may repeat, leaving
        an unused copy in the repository)."""
        try:
            api = await self._ready()
        except (PlatformCallError, StoreUnavailable) as exc:
            return RetryLater(f"not signed in to Matrix yet: {exc}", 5.0)
        assert self._signed is not None
        shape = await image_dimensions(body) if file.mime.startswith("image/") else None
        try:
            mxc = await api.upload(file.name, file.mime, body, 30.0 + file.size / 1_000_000)
        except ApiRefused as exc:
            if exc.status == 413:  # a limit lowered since sign-in, or one the homeserver never told
                size = human_size(file.size)
                return Rejected(f"{file.name} ({size}) is larger than the homeserver takes: {exc}")
            return classify(exc, sending=False)
        except PlatformCallError as exc:
            return classify(exc, sending=False)
        target = {k: str(v) for k, v in row.target.items() if isinstance(v, str)}
        with row_transaction(f"{self._signed.namespace}.o{row.id}"):
            return await self._outbound.send_file(
                row.chat_id, file, mxc, caption, target, row.in_reply_to, shape
            )

    def open_attachment(self, attachment: Attachment) -> AsyncIterator[bytes]:
        """``engine.ports.MediaSource``: a message's file, from the homeserver (``api.py``)."""
        if self._api is None:
            raise NotSent("the Matrix adapter is not started")
        return self._api.download(attachment.ref)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # previews are edits of a sent message (capabilities.drafts is False)
