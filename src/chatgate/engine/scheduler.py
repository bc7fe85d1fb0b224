"""Runs at most one turn per session, in admission order, many sessions at once.

Sessions are claimed from the store with a lease (owner + expiry), so several
processes can share one store and a crashed owner's sessions are picked up
again. The scheduler is woken by admissions in this process and at its start (a
predecessor may have left work), and polls for the rest (leases that expired,
sessions whose retry time came).

A session whose head item was in flight at two process deaths is a suspect: it
runs isolated, at most one suspect at a time, so that a death while it runs can
be blamed on it (the store counts it at the next start) and an external kill of
a busy process is not (see docs/architecture.md, "The stuck-loop guard").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable

from chatgate.domain.errors import LeaseLost, StoreError, StoreUnavailable
from chatgate.domain.store_roles import Leases
from chatgate.domain.tasks import cancel_and_wait
from chatgate.domain.turns import Claim, ClaimTerms, TurnCommit, TurnOutcome
from chatgate.engine.metrics import GatewayMetrics
from chatgate.engine.scheduling import SchedulerSettings, Sends
from chatgate.engine.session_leases import SessionLeases
from chatgate.engine.turn import TurnRunner

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(
        self,
        store: Leases,
        runner: TurnRunner,
        metrics: GatewayMetrics,
        owner: str,
        settings: SchedulerSettings = SchedulerSettings(),
        on_committed: Callable[[], None] = lambda: None,
        sends: Sends | None = None,
    ) -> None:
        self._store = store
        self._leases = SessionLeases(store, owner, settings.lease_seconds)
        self._abandon = self._leases.give_back
        self._runner = runner
        self._metrics = metrics
        self.owner = owner
        self.settings = settings
        self._on_committed = on_committed
        """A commit recorded rows that delivery must claim itself (it wakes delivery)."""
        self._sends = sends
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._renewals: asyncio.Task[None] | None = None
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._turns: dict[str, asyncio.Task[object]] = {}
        self._interrupted: set[str] = set()
        self._failures: dict[str, int] = {}
        self._isolated: set[str] = set()
        """Sessions running an isolated (suspect) turn: at most one, so a death can be blamed."""
        self._drained: set[str] = set()
        """Sessions whose last commit looked for their next item and found none."""
        self._reclaim: set[str] = set()
        """Sessions claimed while their worker was ending: claim them again once it has."""
        self._backlog = True
        """Sessions may be waiting for a slot: the last claim filled every free one, or a wake
        came while none was free. A worker that ends then wakes the claim loop."""
        self._offered = 0
        """Slots promised to admissions whose claiming write is still in flight (``offer``)."""
        self._claiming = 0
        """Slots the claim loop's own claim in flight may fill."""
        self._offers_settled = asyncio.Event()
        self._offers_settled.set()
        self._handoff: dict[str, Claim] = {}
        """Admission's claims of sessions whose drained worker is ending: it starts them as it ends."""
        self._given_back: list[Claim] = []
        """Admission's claims that must not run here (a worker still runs the session, or the
        scheduler is stopping): the claim loop, or the stop, hands them back."""
        self._stopping = False
        self._started_at = time.monotonic()

    @property
    def batch(self) -> int:
        return self.settings.interrupt_batch if self.settings.busy_policy == "interrupt" else 1

    # ------------------------------------------------------------ control

    def start(self) -> None:
        self._started_at = time.monotonic()
        self._wake.set()  # a predecessor may have left work: claim it now, not after a poll interval
        self._loop_task = asyncio.create_task(self._claim_loop(), name="chatgate-scheduler")
        self._renewals = asyncio.create_task(self._leases.keep(self._lease_lost), name="chatgate-leases")

    def wake(self) -> None:
        self._wake.set()

    def on_queued(self, session_key: str) -> None:
        """A new message was committed for ``session_key``."""
        if self.settings.busy_policy == "interrupt":
            turn = self._turns.get(session_key)
            if turn is not None and not turn.done():
                self._interrupted.add(session_key)
                turn.cancel()
        self._wake.set()

    async def stop_session(self, session_key: str) -> None:
        """Cancel this session's running turn (its items were cancelled in the store)."""
        turn = self._turns.get(session_key)
        if turn is not None and not turn.done():
            self._interrupted.add(session_key)
            turn.cancel()
        self._wake.set()

    def running(self) -> int:
        return len(self._workers)

    def offer(self) -> ClaimTerms | None:
        """Terms on which admission may claim the session it queues an event for, in its write.

        Only while a slot is free and no session may be waiting for one, so an admission never
        jumps the queue; it saves the claim loop's own write and hand-off. ``adopt`` follows."""
        if self._stopping or self._loop_task is None or self._backlog:
            return None
        if self._free() <= 0:
            self._backlog = True  # this admission's session will wait for a slot: none may jump it
            return None
        self._offered += 1
        self._offers_settled.clear()
        context = self._runner.settings.history_limit  # the turn's first reads, with the claim
        return ClaimTerms(self.owner, self.settings.lease_seconds, self.batch, context)

    def adopt(self, claim: Claim | None) -> None:
        """Admission's write is over: run the session it claimed on ``offer``'s terms, if any."""
        self._offered -= 1
        if self._offered == 0:
            self._offers_settled.set()
        if claim is None:
            if self._backlog:
                self._wake.set()  # the promised slot is free again, and a session waits for it
            return
        if self._stopping:
            self._given_back.append(claim)
        elif claim.session_key in self._workers:  # ending, or its lease lapsed: see ``_work``
            self._handoff[claim.session_key] = claim
        else:
            self._start_worker(claim)

    async def stop(self) -> None:
        """Stop claiming, cancel running turns; their items stay queued for the next start."""
        self._stopping = self._leases.stopping = True
        await self._settle_offers()
        await cancel_and_wait([*([self._loop_task] if self._loop_task else []), *self._workers.values()])
        await self._give_back()
        await cancel_and_wait([self._renewals] if self._renewals else [])

    async def _settle_offers(self, timeout: float = 5.0) -> None:
        """Wait for admissions' claiming writes still in flight, so their claims are given back."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._offers_settled.wait(), timeout)

    async def _give_back(self) -> None:
        while self._given_back:
            claim = self._given_back.pop()
            if claim.session_key not in self._workers:  # else a worker of ours holds its lease anew
                await self._abandon(claim.session_key, tuple(i.seq for i in claim.items), None, None)

    async def drain(self, timeout: float) -> bool:
        """Stop claiming and wait up to ``timeout`` for running turns to finish."""
        self._stopping = self._leases.stopping = True
        await self._settle_offers()
        if self._loop_task is not None:
            await cancel_and_wait([self._loop_task])
        workers = list(self._workers.values())
        if workers:
            _, pending = await asyncio.wait(workers, timeout=timeout)
        await self._give_back()  # the renewals run on for the workers left: ``stop`` ends them
        return not workers or not pending

    # ------------------------------------------------------------ loops

    async def _claim_loop(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.poll_interval):
                    await self._wake.wait()
            self._wake.clear()
            await self._give_back()
            free = self._free()
            if self._stopping:
                return
            if free <= 0:
                self._backlog = True
                continue
            self._claiming = free  # until each claim has its worker, no admission is offered these
            try:
                claims = await self._store.claim_sessions(
                    self.owner, free, self.settings.lease_seconds, self.batch, self._suspect_room()
                )
                for claim in claims:
                    if claim.session_key in self._workers:
                        # Our own worker still runs it (its lease lapsed, or it is ending after a
                        # commit that found nothing more): never run a session twice.
                        self._reclaim.add(claim.session_key)
                        await self._abandon(claim.session_key, tuple(i.seq for i in claim.items), None, None)
                        continue
                    self._start_worker(claim)
            except StoreUnavailable as exc:
                log.warning("cannot claim sessions: %s", exc)
                continue
            finally:
                self._claiming = 0
            self._backlog = len(claims) == free
            if self._backlog:
                self._wake.set()  # there may be more waiting

    def _free(self) -> int:
        return self.settings.max_concurrent_turns - len(self._workers) - self._offered - self._claiming

    def _start_worker(self, claim: Claim) -> None:
        if self._stopping:  # a claim that landed as the stop began: ``stop`` gives it back
            self._given_back.append(claim)
            return
        key = claim.session_key
        self._workers[key] = asyncio.create_task(self._work(claim), name=f"chatgate-session:{key}")

    def _suspect_room(self) -> int:
        """One suspect at a time, and none until the process has lived ``suspect_delay``."""
        settled = time.monotonic() - self._started_at >= self.settings.suspect_delay
        return 1 if settled and not self._isolated else 0

    async def _work(self, claim: Claim) -> None:
        key = claim.session_key
        self._leases.hold(key)
        current: Claim | None = claim
        turns = ran = 0
        try:
            while current is not None:
                turns += 1
                ran = max(ran, *(i.seq for i in current.items))
                # At capacity, a busy session yields its slot now and then so that sessions
                # waiting for a slot get one in admission order instead of starving.
                yield_slot = (
                    turns % self.settings.turns_before_yield == 0
                    and len(self._workers) >= self.settings.max_concurrent_turns
                )
                current = await self._run_one(current, take_next=not yield_slot)
        finally:
            self._leases.release(key)
            self._workers.pop(key, None)
            self._turns.pop(key, None)
            # A session that ended with nothing left frees a slot no one waits for unless a
            # claim was cut short; waking then would only run a claim that finds nothing.
            drained = key in self._drained and key not in self._reclaim
            self._drained.discard(key)
            self._reclaim.discard(key)
            # A claim admission took meanwhile runs next if it holds only items this worker never
            # ran and its last commit released the lease; else it goes back (a lapsed lease).
            handed = self._handoff.pop(key, None)
            if handed is not None and drained and not self._stopping and handed.items[0].seq > ran:
                self._start_worker(handed)
            elif handed is not None:
                self._given_back.append(handed)
                self._wake.set()
            elif not self._stopping and (self._backlog or not drained):
                self._wake.set()

    async def _run_one(self, claim: Claim, take_next: bool = True) -> Claim | None:
        key = claim.session_key
        seqs = tuple(i.seq for i in claim.items)
        if claim.isolated:
            self._isolated.add(key)
        try:
            return await self._run_claim(claim, seqs, take_next)
        finally:
            if claim.isolated:
                self._isolated.discard(key)
                self._wake.set()  # the next suspect may run now

    async def _run_claim(self, claim: Claim, seqs: tuple[int, ...], take_next: bool) -> Claim | None:
        key = claim.session_key
        started = time.perf_counter()
        turn = asyncio.create_task(self._runner.run(claim), name=f"chatgate-turn:{key}")
        self._turns[key] = turn
        try:
            outcome = await asyncio.shield(turn)
        except asyncio.CancelledError:
            turn.cancel()
            await asyncio.gather(turn, return_exceptions=True)
            interrupted = key in self._interrupted
            self._interrupted.discard(key)
            await self._abandon(key, seqs, None, None)
            if interrupted and not self._stopping and not _being_cancelled():
                return None
            raise
        except StoreUnavailable as exc:  # the turn could not read its history...: not a bug
            log.warning("turn interrupted: %s", exc, extra={"session_key": key})
            await self._abandon(key, seqs, self._backoff(key), f"turn interrupted: {exc}", patient=True)
            return None
        except Exception as exc:
            log.exception("turn failed", extra={"session_key": key})
            await self._abandon(key, seqs, self._backoff(key), f"turn failed: {exc}", patient=True)
            return None
        commit = self._commit(outcome, self.batch if take_next else 0)
        try:
            committed = await asyncio.shield(commit)
        except asyncio.CancelledError:
            await self._settle_interrupted_commit(key, commit)
            raise
        except LeaseLost as exc:
            log.info("turn result discarded: %s", exc, extra={"session_key": key})
            await self._abandon(key, seqs, None, None)
            await self._runner.discard(outcome)  # its streamed preview must not keep a cursor
            return None
        except StoreUnavailable as exc:
            log.warning("cannot commit turn: %s", exc, extra={"session_key": key})
            await self._abandon(key, seqs, self._backoff(key), f"commit failed: {exc}", patient=True)
            return None
        self._failures.pop(key, None)
        self._metrics.turns.labels(outcome.outcome).inc()
        self._metrics.turn_seconds.observe(time.perf_counter() - started)
        if not outcome.outbox or len(committed.sending) < len(outcome.outbox):
            self._on_committed()  # rows delivery must claim itself (a later part, a busy chat)
        if take_next and committed.next is None:
            self._drained.add(key)
        return committed.next

    def _commit(self, outcome: TurnOutcome, batch: int) -> asyncio.Future[TurnCommit]:
        """The turn's commit, claiming for delivery what room delivery promised for it.

        Whoever waits for it (or none, if it is cancelled meanwhile), the rows it claimed are
        handed to delivery as soon as it is done: a claimed row never waits for a restart."""
        chats = len({(d.platform, d.chat_id) for d in outcome.outbox})
        sends = self._sends
        room = sends.reserve(chats) if sends is not None else 0
        commit = asyncio.ensure_future(
            self._store.commit_turn(self.owner, outcome, self.settings.lease_seconds, batch, room)
        )
        if sends is not None and room > 0:

            def hand_over(done: asyncio.Future[TurnCommit]) -> None:
                failed = done.cancelled() or done.exception() is not None
                sends.hand_over(room, () if failed else done.result().sending)

            commit.add_done_callback(hand_over)
        return commit

    async def _settle_interrupted_commit(self, key: str, commit: asyncio.Future[TurnCommit]) -> None:
        """The commit was already handed to the store: see it through, give back what it claimed.

        Shielded: a further cancellation of this worker (``cancel_and_wait`` repeats it) must not
        cancel the commit's own task, whose done-callback hands the rows it claimed to delivery
        (the write itself commits in the store either way)."""
        try:
            committed = await asyncio.shield(commit)
        except (StoreError, asyncio.CancelledError):
            return
        if committed.next is not None:
            await self._abandon(key, tuple(i.seq for i in committed.next.items), None, None)

    def _backoff(self, key: str) -> float:
        n = self._failures.get(key, 0) + 1
        self._failures[key] = n
        delay = min(self.settings.retry_max, self.settings.retry_base * 2 ** (n - 1))
        return float(time.time() + delay * (0.5 + random.random() / 2))

    def _lease_lost(self, key: str) -> None:
        turn = self._turns.get(key)
        if turn is not None:
            log.warning("lost the lease on %s; cancelling its turn", key)
            self._interrupted.add(key)
            turn.cancel()


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
