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

import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from chatgate.domain.outbound import Capabilities, DeliveryResult
from chatgate.domain.outbox import OutboxRow
from chatgate.domain.source import Source
from chatgate.domain.store_roles import Cursors
from chatgate.engine.ports import AdapterState, Intake, deliver_final
from chatgate.platforms.kit.forwarding import ForwardsToOutbound
from chatgate.platforms.matrix.decode import PLATFORM, Addressing
from chatgate.platforms.matrix.errors import MatrixCallError, NotSent
from chatgate.platforms.matrix.lane import JoinPolicy, MatrixLane
from chatgate.platforms.matrix.outbound import MatrixOutbound, row_transaction
from chatgate.platforms.matrix.rooms import Rooms
from chatgate.platforms.matrix.section import MatrixSection
from chatgate.platforms.matrix.sync import SyncLoop

if TYPE_CHECKING:
    from chatgate.platforms.matrix.api import MatrixApi

log = logging.getLogger(__name__)
STOP_BUDGET = 10.0


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
        self._namespace = ""
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

    async def _call(self, method: str, where: str, body: Any = None, **options: Any) -> dict[str, Any]:
        if self._api is None:
            raise NotSent(f"{method} {where}: the Matrix adapter is not started")
        return await self._api.call(method, where, body, **options)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Sign in and sync (again, after a fleet standby took over: from the stored token)."""
        await self._open()
        if self.sync is not None:
            await self.sync.wait_stopped(STOP_BUDGET)  # a sync stopped by a lost fleet lock has ended
            self.sync.start()

    async def start_sending(self) -> None:
        """A fleet's standby: send replies and edit previews, but leave /sync to the process that
        holds the account's lock (two would admit, and answer, the same events)."""
        await self._open()
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

    async def _open(self) -> None:
        if self._api is not None:
            return
        from chatgate.platforms.matrix.api import MatrixApi  # aiohttp, once this process holds the lock

        self._api = MatrixApi(self._section.homeserver)
        self._detail = "signing in"
        self._api.token = await self._login() if self._section.password_env else self._secret
        self.user_id = await self._whoami()
        self._namespace = await self._transaction_namespace()
        section = self._section
        self.lane.rules = Addressing(
            self.user_id,
            await self._display_name(),
            section.require_mention,
            frozenset(section.free_response_rooms),
        )
        self.sync = SyncLoop(
            self._call, self._cursors, f"matrix:{self.user_id}:next_batch", self.lane.admit_batch,
            timeout=section.sync_timeout_seconds, timeline_limit=section.timeline_limit,
            max_catch_up=section.max_catch_up_events, on_state=self._set_state,
        )  # fmt: skip
        self.sync.guard = self._guard

    async def _login(self) -> str:
        from chatgate.platforms.matrix.api import path  # (idem)

        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": self._section.user_id},
            "password": self._secret,
            "device_id": self._section.device_id,
            "initial_device_display_name": "chatgate",
        }
        answer = await self._call("POST", path("login"), body)
        token = answer.get("access_token")
        if not isinstance(token, str):
            raise MatrixCallError("login: the homeserver answered without an access token")
        return token

    async def _whoami(self) -> str:
        from chatgate.platforms.matrix.api import path  # (idem)

        me = (await self._call("GET", path("account", "whoami"))).get("user_id")
        if not isinstance(me, str):
            raise MatrixCallError("whoami: the homeserver answered without a user_id")
        if self._section.user_id and me != self._section.user_id:
            raise MatrixCallError(
                f"the access token belongs to {me}, not platforms.matrix.user_id {self._section.user_id}"
            )
        return me

    async def _display_name(self) -> str | None:
        from chatgate.platforms.matrix.api import path  # (idem)

        try:
            name = (await self._call("GET", path("profile", self.user_id, "displayname"))).get("displayname")
        except MatrixCallError:
            return None
        return name if isinstance(name, str) and name.strip() else None

    async def _transaction_namespace(self) -> str:
        """A random name kept in this store: outbox rows' transaction ids are unique per store,
        so a new state directory never reuses an old one's (the homeserver would drop the send)."""
        name = f"matrix:{self.user_id}:txn"
        found = await self._cursors.get_cursor(name)
        if found:
            return found
        created = f"cg{secrets.token_hex(6)}"
        await self._cursors.set_cursor(name, created)
        return created

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
        with row_transaction(f"{self._namespace}.o{row.id}"):
            return await deliver_final(self, row, self._duplicate_marker)

    async def draft(self, source: Source, in_reply_to: str | None, text: str) -> None:
        return None  # previews are edits of a sent message (capabilities.drafts is False)
