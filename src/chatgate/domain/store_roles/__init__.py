"""The store's roles: one typing Protocol per kind of durable state, and nothing else.

Each engine stage and adapter is typed with the narrow role (or the part of a role) it actually
uses, so it cannot reach state that is not its business, and a reader sees in its constructor
which state it touches. They live in the domain, not in ``chatgate.store``, because adapters may
use a role but must never import the store package; only the composition root (``app``) holds a
concrete backend, and ``chatgate.store.base.Store`` is every role at once.

The roles are the unit of the contract suite (``tests/contract/``: every method of
every role has a contract test, checked by introspecting ``ROLES``) and of the backends
(one module per role per backend, e.g. ``store/sqlite/outbox.py``). Where consumers use
disjoint parts of one role, the part is a protocol of its own and the role extends it
(``Outbox`` = ``OutboxClaims`` + ``OutboxConfirmations`` + ``OutboxNotices``).

Every method is a coroutine and never blocks the event loop. A method that cannot reach
its storage raises ``StoreUnavailable`` and has changed nothing; "absent" is ``None`` or
an empty list, never an exception, so callers never mistake one for the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

from chatgate.domain.api_keys import ApiExchange, ApiKeyRecord
from chatgate.domain.approvals import ApprovalRecord, ApprovalResolution, GrantScope
from chatgate.domain.context import ChatLabels
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbox import AdmitRequest, AdmitResult, QueueStats, RejectedInbound
from chatgate.domain.outbox import OutboxDraft, OutboxRow, OutboxSettlement, OutboxStatus, Undelivered
from chatgate.domain.pairing import PairedUser, PairingApproval, PairingIssue, PairingLimits, PairingRequest
from chatgate.domain.sessions import SessionInfo
from chatgate.domain.source import Source
from chatgate.domain.store_roles.accounts import Accounts as Accounts
from chatgate.domain.store_roles.accounts import WebChats as WebChats
from chatgate.domain.store_roles.background import Schedules as Schedules
from chatgate.domain.store_roles.background import Tasks as Tasks
from chatgate.domain.store_roles.leases import Leases as Leases
from chatgate.domain.store_roles.leases import TurnJournal as TurnJournal
from chatgate.domain.store_roles.media import Media as Media

# ---------------------------------------------------------------- lifecycle


class Lifecycle(Protocol):
    """Opening, probing and closing the backend; taking over after a dead predecessor."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self, timeout: float = 1.0) -> None:
        """Raise ``StoreUnavailable`` unless the store can be read and written now."""
        ...

    async def recover(self, owner: str) -> int:
        """Take over what a dead predecessor left: leases, mid-send rows. Returns the leases released.

        An item a dead owner was running isolated has the death blamed on it (``crashes`` + 1)."""
        ...


class FleetView(Protocol):
    """The other gateway processes sharing this store, as ``chatgate status`` lists them."""

    async def fleet_members(self) -> list[dict[str, object]] | None:
        """Every other process on the store (owner, host, pid, start, leases, sends, alive), live
        or not yet reaped; None for a store that serves one process (it has no fleet)."""
        ...


# ---------------------------------------------------------------- inbox


class Rejections(Protocol):
    """Deliveries acknowledged upstream without being admitted (so acking them loses nothing silently)."""

    async def record_rejected(
        self, transport: str, delivery_id: str | None, reason: str, excerpt: str
    ) -> None:
        """Keep a delivery that can never be admitted, with why."""
        ...

    async def rejected(self, limit: int = 100) -> list[RejectedInbound]:
        """The latest rejected deliveries, newest first."""
        ...


class Inbox(Rejections, Protocol):
    """The durable queue of admitted events: admission commits to it, with a command's effects."""

    claims_on_admit: bool
    """Whether ``admit`` claims the session on ``AdmitRequest.claim`` terms (SQLite); where it
    never does (PostgreSQL), admission asks the scheduler for no offer."""

    async def admit(self, request: AdmitRequest) -> AdmitResult:
        """Commit the event (once per transport and delivery id) and what admission decided about it.

        An edit (``payload["edit_of"]``, ``domain/edits.py``) of this session's message that no
        turn has taken yet replaces that message's text, and is itself done (outcome ``amended``)."""
        ...

    async def make_durable(self) -> None:
        """Return once every admission so far is on the disk (a relaxed one may not be yet)."""
        ...

    async def cancel_running(self, session_key: str, reason: str) -> int:
        """Cancel the items of the session's running turn (the waiting ones stay); returns how many."""
        ...

    async def queue_depth(self) -> int:
        """Admitted items not yet done or cancelled."""
        ...

    async def queue_stats(self) -> QueueStats: ...


# ---------------------------------------------------------------- transcript


class Transcript(Protocol):
    """Sessions and what was said in them."""

    async def history(self, session_id: str, limit: int) -> list[HistoryEntry]:
        """The conversation's latest ``limit`` entries, oldest first."""
        ...

    async def session_source(self, session_key: str) -> Source | None:
        """The source of the session's latest admitted event."""
        ...

    async def session_info(self, session_key: str) -> SessionInfo | None: ...

    async def list_sessions(self, limit: int = 100) -> list[SessionInfo]:
        """Sessions by most recent activity first."""
        ...


# ---------------------------------------------------------------- outbox


class OutboxClaims(Protocol):
    """The delivery side of the ledger: hand out head-of-chat rows, record what happened to them."""

    async def claim_outbox(self, limit: int) -> list[OutboxRow]:
        """Mark due head-of-chat rows ``sending`` and count an attempt on each."""
        ...

    async def settle_outbox(self, settlements: list[OutboxSettlement]) -> bool:
        """Record each row's outcome; ``counts_attempt=False`` takes back the claim's attempt (a
        wait for a rate limit or a route is not a try), so waiting can never use up a row.

        True when a settled row's chat has another open row after it (pending or ambiguous,
        due or not): delivery claims again only then, instead of after every send."""
        ...


class OutboxConfirmations(Protocol):
    """A client that confirms what it displayed: its chat's unconfirmed rows, and the confirmations."""

    async def unconfirmed_for_chat(self, platform: str, chat_id: str) -> list[OutboxRow]: ...

    async def unconfirmed_page(
        self, platform: str, chat_id: str, after_id: int, limit: int
    ) -> list[OutboxRow]:
        """At most ``limit`` of the chat's unconfirmed rows with ``id > after_id``, in id order:
        a backlog of any size is sent a page at a time, as fast as the client reads."""
        ...

    async def confirm_outbox(self, platform: str, chat_id: str, row_id: int) -> bool:
        """True when this call confirmed the row (once; never for another chat's row)."""
        ...

    async def hold_chat_route(self, platform: str, chat_id: str) -> int:
        """The chat's client is connected to this process now: the chat's later replies, and
        its replies not yet delivered, are delivered by this process. Returns the rows moved."""
        ...


class OutboxNotices(Protocol):
    """Outbound messages recorded outside a turn's commit (notices, plain-text prompts)."""

    async def enqueue_outbox(self, drafts: Sequence[OutboxDraft]) -> None:
        """Record outbound messages (idempotent by key); committed on return."""
        ...

    async def outbox_status(self, idem_key: str) -> OutboxStatus | None:
        """The ledger status of the row recorded under ``idem_key``; None when there is none."""
        ...

    async def undelivered_in_chat(self, platform: str, chat_id: str) -> int:
        """How many of the chat's rows still wait to reach the platform (``pending``, ``sending``
        or ``ambiguous``): a turn shows no preview above an earlier reply that has not."""
        ...


class OutboxWatch(Protocol):
    """What ``chatgate status``, the metrics and the stuck-reply log read."""

    async def undelivered(self, now: float, stuck_after: float, most: int) -> Undelivered:
        """Replies not yet delivered, the oldest's time, and up to ``most`` stuck ones (``StuckReply``)."""
        ...


class Outbox(OutboxClaims, OutboxConfirmations, OutboxNotices, OutboxWatch, Protocol):
    """Every outbound message and its ledger."""


# ---------------------------------------------------------------- approvals


class ApprovalReads(Protocol):
    """Looking prompts up, for whoever shows or answers them."""

    async def get_approval(self, prompt_id: str) -> ApprovalRecord | None: ...

    async def open_approvals(self, platform: str, chat_id: str) -> list[ApprovalRecord]:
        """The chat's pending prompts, oldest first."""
        ...


class Approvals(ApprovalReads, Protocol):
    """Approval prompts (a compare-and-set decides each once) and remembered approvals (grants)."""

    async def create_approval(self, record: ApprovalRecord) -> None:
        """Record a new pending approval prompt."""
        ...

    async def set_prompt_shown(self, prompt_id: str, via: str, message_id: str | None) -> None:
        """How the prompt was shown (``buttons``/``text``) and the platform message showing it."""
        ...

    async def resolve_approval(
        self,
        prompt_id: str,
        outcome: Literal["approved", "denied", "expired"],
        tier: str | None,
        by_id: str | None,
        by_name: str | None,
        now: float,
        *,
        reason: str | None = None,
        notice: OutboxDraft | None = None,
    ) -> ApprovalResolution:
        """Compare-and-set: changes the row only if it is still pending and, for an
        answer, not past ``expires_at`` (a late answer records the expiry instead and
        loses). A won approval for ``session``/``always`` stores its grants, and
        ``notice`` is recorded, in the same transaction. Returns the recorded row."""
        ...

    async def expire_open_approvals(
        self,
        now: float,
        reason: str,
        notice_for: Callable[[ApprovalRecord], OutboxDraft | None] | None = None,
    ) -> list[ApprovalRecord]:
        """Expire every pending prompt (start-up: their turns died with the old process),
        with each one's notice in the same transaction; returns them as recorded."""
        ...

    async def add_grant(
        self, scope: GrantScope, session_key: str | None, rule_key: str, command: str
    ) -> None:
        """Remember an approval: per session key (until ``/new``) or for every session."""
        ...

    async def granted(self, session_key: str, rule_keys: Sequence[str]) -> bool:
        """Whether every one of ``rule_keys`` is granted for this session (or always)."""
        ...


# ---------------------------------------------------------------- cursors and labels


class Cursors(Protocol):
    """Named upstream positions, such as a long-polling offset."""

    async def get_cursor(self, name: str) -> str | None:
        """The value last stored under ``name``."""
        ...

    async def set_cursor(self, name: str, value: str, *, durable: bool = False) -> None:
        """Store ``value`` under ``name``; returns only after it is committed. A position lost to
        a power cut is fetched again from the one before; ``durable``: this one must be on the
        disk before it returns (it adds what nothing before it would fetch again)."""
        ...


class Labels(Protocol):
    """The latest observed chat name and topic per chat (written by admission, read by turns)."""

    async def chat_labels(self, platform: str, scope: str | None, chat_id: str) -> ChatLabels: ...


class SessionProfiles(Protocol):
    """Each session's model profile (``/model NAME``), by session key: it outlives ``/new``."""

    async def session_profile(self, session_key: str) -> str | None:
        """The profile the session chose; None: it never chose (the default applies)."""
        ...

    async def set_session_profile(self, session_key: str, profile: str, now: float) -> None:
        """Record the choice (committed on return; the same choice again changes nothing)."""
        ...


# ---------------------------------------------------------------- pairing


class PairingReads(Protocol):
    """Who was approved by pairing (admission's authorizer reads it, with a short cache)."""

    async def paired_users(self, platform: str | None = None) -> list[PairedUser]:
        """Approved users (of one platform, or all), oldest approval first."""
        ...


class Pairing(PairingReads, Protocol):
    """DM pairing: one-time codes for strangers, the operator's approvals, and the lockout."""

    async def request_pairing(
        self,
        platform: str,
        user_id: str,
        user_name: str | None,
        chat_id: str | None,
        now: float,
        limits: PairingLimits,
        notice_for: Callable[[PairingRequest], OutboxDraft],
    ) -> PairingIssue:
        """The user's live code (a new one if none), and its reply recorded in the same
        transaction when due (first message, then at most once per reply interval)."""
        ...

    async def approve_pairing(self, code: str, now: float, limits: PairingLimits) -> PairingApproval:
        """Approve a live code once; a wrong or expired one counts towards the lockout."""
        ...

    async def revoke_pairing(self, platform: str, user_id: str) -> bool:
        """Forget an approved user (and their live code); True when there was one."""
        ...

    async def pending_pairings(self, now: float) -> list[PairingRequest]:
        """Live codes, oldest first (expired ones are not listed)."""
        ...


# ---------------------------------------------------------------- the OpenAI-compatible API


class ApiKeys(Protocol):
    """Bearer keys of the API: only a hash of each token is kept; revoked keys stay listed."""

    async def create_api_key(self, record: ApiKeyRecord, token_hash: str) -> None:
        """Record a new key (its id and hash are unique)."""
        ...

    async def api_key_by_hash(self, token_hash: str) -> ApiKeyRecord | None:
        """The key whose token hashes to ``token_hash``, revoked or not; None when there is none."""
        ...

    async def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key, oldest first."""
        ...

    async def revoke_api_key(self, key_id: str, now: float) -> bool:
        """Revoke a key for good; True when it was active."""
        ...


class Exchanges(Protocol):
    """What an API request became: its inbox row and the answer recorded for it."""

    async def api_exchange(self, transport: str, delivery_id: str) -> ApiExchange | None:
        """The admitted event and its final (or command reply) once committed; None if never admitted."""
        ...


ROLES: tuple[type, ...] = (
    Lifecycle,
    FleetView,
    Inbox,
    Leases,
    Transcript,
    Outbox,
    Approvals,
    Cursors,
    Labels,
    SessionProfiles,
    Pairing,
    ApiKeys,
    Exchanges,
    Schedules,
    Tasks,
    Accounts,
    WebChats,
    Media,
)
"""Every role; ``chatgate.store.base.Store`` combines them and the contract suite covers each."""
