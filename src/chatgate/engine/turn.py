"""One agent turn: history, pinned context, agent stream, and its outcome.

The turn returns a ``TurnOutcome`` that the scheduler commits in one transaction
(transcript + inbox done + outbox final). Before that it records only what must
survive its process or be seen first (``TurnJournal``): a resumed turn's notice and
the notices of files that did not come through, before the agent runs, so they
come before anything the turn shows; and its preview's message id, so a successor
can take that message over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

import msgspec
from msgspec.structs import replace

from chatgate.agents.base import (
    Agent,
    AgentFailed,
    AgentRequest,
    Final,
    ImageMade,
    TextDelta,
    ToolCall,
    ToolFinished,
    ToolRunner,
    ToolStarted,
    TurnMessage,
)
from chatgate.domain.background import as_restored
from chatgate.domain.context import render_session_context
from chatgate.domain.edits import fold_edits
from chatgate.domain.history import HistoryEntry
from chatgate.domain.inbound import Inbound
from chatgate.domain.media import MediaItem
from chatgate.domain.outbound import PREVIEW_KEY, REPLY_VIA_KEY
from chatgate.domain.outbox import OutboxDraft, OutboxStatus
from chatgate.domain.outfiles import OutFile, file_drafts
from chatgate.domain.persona import INSTRUCTIONS_KEY, Personas, system_message, with_instructions
from chatgate.domain.session_key import IsolationPolicy, is_shared_session
from chatgate.domain.shown import Shown
from chatgate.domain.source import Source, egress_target
from chatgate.domain.store_roles import Labels, SessionProfiles, Transcript, TurnJournal
from chatgate.domain.turns import Claim, QueuedItem, TurnContext, TurnOutcome
from chatgate.domain.usage import Usage, estimate_usage
from chatgate.engine.approvals import ToolContext
from chatgate.engine.failures import OUTCOMES, apology, new_error_id, turn_timeout_apology
from chatgate.engine.made_files import MadeFiles
from chatgate.engine.media_fetch import MediaFetcher, TurnMedia
from chatgate.engine.ports import Adapter
from chatgate.engine.preview_holds import Hold, PreviewHolds
from chatgate.engine.profile_choice import Profiles, chosen_profile, fitted
from chatgate.engine.ratelimit import RateBudget
from chatgate.engine.replies import final_drafts, given_up
from chatgate.engine.streaming import STOPPED_SUFFIX, StreamConsumer, close_preview
from chatgate.engine.tool_progress import ToolSteps, finished_line, started_line, with_status
from chatgate.engine.typing_indicators import TypingIndicators

log = logging.getLogger(__name__)
ToolsFactory = Callable[[ToolContext], ToolRunner | None]


class TurnSettings(msgspec.Struct, frozen=True):
    history_limit: int = 50
    max_attempts: int = 2
    """Deaths blamed on a message (it ran isolated, and the process died) before it is given up."""
    timeout_seconds: float = 600.0
    draft_interval: float | None = None
    """Seconds between two drafts; None: the platform's own (``Capabilities.draft_interval``)."""
    silence_marker: str = "NO_REPLY"
    typing_interval: float = 4.0
    """Seconds between two typing indicators while a turn shows nothing yet."""
    typing_delay: float = 0.5
    """Seconds a turn may show nothing before its first typing indicator (0: at once)."""
    duplicate_marker: str = "(possible repeat) "
    tool_progress: bool = True
    """Show a running tool as one status line in the preview (``engine/tool_progress.py``)."""
    personas: Personas = msgspec.field(default_factory=Personas)
    """The operator's system prompt, by platform and chat (``domain/persona.py``)."""
    profiles: Profiles = msgspec.field(default_factory=Profiles)
    """The model profiles; a turn runs on its session's (``engine/profile_choice.py``)."""


class _Reply(msgspec.Struct, frozen=True):
    text: str
    outcome: str
    preview_message_id: str | None = None
    usage: Usage | None = None
    steps: str | None = None


class TurnStore(Transcript, Labels, TurnJournal, SessionProfiles, Protocol):
    """The roles a turn reads, and the journal of what it records before the scheduler commits it."""

    async def outbox_status(self, idem_key: str) -> OutboxStatus | None: ...

    async def undelivered_in_chat(self, platform: str, chat_id: str) -> int: ...


def is_delegated(inbound: Inbound) -> bool:
    """A delegated child's input: its turn shows nothing in the chat and records no reply there."""
    task = inbound.payload.get("task")
    return isinstance(task, dict) and task.get("kind") == "delegate"


async def _never_held() -> bool:
    return False


class TurnRunner:
    def __init__(
        self,
        store: TurnStore,
        agent: Agent,
        adapters: dict[str, Adapter],
        policy_for: Callable[[str], IsolationPolicy],
        settings: TurnSettings = TurnSettings(),
        budget: RateBudget | None = None,
        on_preview: Callable[[str, str], None] = lambda platform, op: None,
        tools: ToolsFactory | None = None,
        owner: str = "",
        on_outbox: Callable[[], None] = lambda: None,
        typist: TypingIndicators | None = None,
        media: MediaFetcher | None = None,
    ) -> None:
        self._media = media  # fetches the turn's attachments before the agent is asked
        self._owner = owner
        self._on_outbox = on_outbox
        self._on_preview = on_preview
        self._tools = tools
        self._store = store
        self._agent = agent
        self._adapters = adapters
        self._policy_for = policy_for
        self.settings = settings
        self._budget = budget or RateBudget()
        self._typist = typist
        self._born = time.time()

    async def run(self, claim: Claim) -> TurnOutcome:
        items = claim.items
        last = items[-1]
        source = last.inbound.source
        key = claim.session_key
        seqs = tuple(i.seq for i in items)
        attempts = max(i.attempts for i in items)
        reply_to = last.inbound.message_ref
        # An interaction is answered through its own route (e.g. a Discord follow-up), never a chat preview.
        route = {REPLY_VIA_KEY: last.inbound.reply_route} if last.inbound.reply_route else {}
        adapter = self._adapters.get(source.platform)
        caps = adapter.capabilities if adapter is not None else None
        internal = is_delegated(last.inbound)
        if max(i.crashes for i in items) >= self.settings.max_attempts:
            return given_up(claim, attempts, caps, route, internal)

        holds = PreviewHolds(self._store, self._adapters, self._owner, self._on_outbox)
        hold = await holds.hold(claim, route, attempts) if not internal else _never_held
        media_fetcher = self._media if any(q.inbound.attachments for q in items) else None  # plain text: none
        fetched = await media_fetcher.fetch(items) if media_fetcher is not None else TurnMedia()
        if not internal:  # the files that did not come through: said before the answer starts
            hold = await holds.shown_first(claim, fetched.notices(key, route), hold)
        outbox: list[OutboxDraft] = []
        attached: list[OutFile] = []  # what the turn's attach_file calls add to its reply
        request, inputs = await self._request(claim, reply_to, route, fetched, attached)
        consumer = self._consumer(adapter if not internal else None, claim, reply_to, route, hold)
        reply = await self._reply(
            request, consumer, MadeFiles(self._media, source.platform, key, attached, "image")
        )
        transcript = [HistoryEntry("user", model_input, media) for model_input, media in inputs]
        if reply.outcome == "ok":  # an apology is for the user, never the model's history
            transcript.append(HistoryEntry("assistant", reply.text))
        if internal:  # a delegated child answers its parent's inbox (in the commit), not the chat
            return TurnOutcome(key, claim.session_id, seqs, tuple(transcript), (), reply.outcome)
        limit = caps.max_upload_bytes if caps else 0
        ok = reply.outcome == "ok"
        files = file_drafts(source, key, last.seq, attached, reply_to, limit, route) if ok else []
        if self.settings.silence_marker and reply.text.strip() == self.settings.silence_marker:
            log.info("the agent chose not to reply", extra={"session_key": key, "seqs": seqs})
            outbox += files
            return TurnOutcome(key, claim.session_id, seqs, tuple(transcript), tuple(outbox), "silent")
        outbox += final_drafts(
            source,
            key,
            last.seq,
            reply.text,
            reply_to,
            caps,
            reply.preview_message_id,
            reserve=self.settings.duplicate_marker,
            route=route,
            failure=None if reply.outcome == "ok" else reply.outcome,
            usage=(reply.usage or estimate_usage(request.texts(), reply.text))
            if reply.outcome == "ok"
            else None,
            steps=reply.steps,
        )
        outbox += files  # after the text: a file is the reply's attachment
        return TurnOutcome(key, claim.session_id, seqs, tuple(transcript), tuple(outbox), reply.outcome)

    def _consumer(
        self, adapter: Adapter | None, claim: Claim, reply_to: str | None, route: dict[str, str], hold: Hold
    ) -> StreamConsumer:
        """What shows the turn as it streams (previews, typing); none for a delegated child."""
        key = claim.session_key
        return StreamConsumer(
            adapter,
            claim.items[-1].inbound.source,
            reply_to,
            self._budget,
            draft_interval=self.settings.draft_interval,
            silence_marker=self.settings.silence_marker,
            on_update=self._on_preview,
            previews=not route,
            typing_every=self.settings.typing_interval,
            typing_delay=self.settings.typing_delay,
            on_message=lambda message_id: self._store.record_preview(self._owner, key, message_id),
            hold=hold,
            typist=self._typist,
        )

    async def _request(
        self,
        claim: Claim,
        reply_to: str | None,
        route: dict[str, str],
        fetched: TurnMedia,
        attached: list[OutFile],
    ) -> tuple[AgentRequest, list[tuple[str, tuple[MediaItem, ...]]]]:
        """What the agent is asked (context, history, messages and files), and the transcript rows."""
        items = claim.items
        source = items[-1].inbound.source
        shared = is_shared_session(source, self._policy_for(source.platform))
        messages = fold_edits([self._marked(i) for i in items])  # an edit of a waiting message updates it
        context = claim.context or await self._read_context(claim.session_id, source)
        labels, history = context.labels, list(context.history)
        profile = await chosen_profile(self._store, self.settings.profiles, claim)
        inputs = fetched.inputs(messages, shared)
        any_media = fetched.all_items() or any(entry.media for entry in history)
        media = await self._media.contents(fetched.all_items(), history) if self._media and any_media else {}
        request = AgentRequest(
            system=system_message(
                with_instructions(
                    self.settings.personas.for_source(source), items[-1].inbound.payload.get(INSTRUCTIONS_KEY)
                ),
                render_session_context(source, labels, shared=shared),
            ),
            history=tuple(history),
            messages=tuple(
                TurnMessage(
                    text=m.text,
                    sender=m.source.user_name,
                    message_ref=m.message_ref,
                    received_at=m.received_at,
                    media=fetched.items(m),
                    media_notes=fetched.notes(m),
                )
                for m in messages
            ),
            model_input="\n".join(inputs),
            session_key=claim.session_key,
            tools=self._tools_for(claim, source, reply_to, route, attached),
            media=media,
        )
        sent = [(i, fetched.items(m)) for i, m in zip(inputs, messages, strict=True)]
        return fitted(request, profile), sent

    async def _read_context(self, session_id: str, source: Source) -> TurnContext:
        """The reads an admission's claim makes with it (``Claim.context``), for any other claim."""
        labels = await self._store.chat_labels(source.platform, source.scope_id, source.chat_id or "")
        return TurnContext(tuple(await self._store.history(session_id, self.settings.history_limit)), labels)

    def _marked(self, item: QueuedItem) -> Inbound:
        """A delegated task's completion admitted by an earlier process is marked restored."""
        inbound = item.inbound
        if "task_completion" in inbound.payload and inbound.received_at < self._born:
            return replace(inbound, text=as_restored(inbound.text))
        return inbound

    def _tools_for(
        self,
        claim: Claim,
        source: Source,
        reply_to: str | None,
        route: dict[str, str],
        attached: list[OutFile],
    ) -> ToolRunner | None:
        """The turn's tools: prompts go to the chat of the turn's last message, whose sender
        is the requester (who may answer them)."""
        if self._tools is None:
            return None
        ctx = ToolContext(
            session_key=claim.session_key,
            session_id=claim.session_id,
            inbox_seq=claim.items[-1].seq,
            source=source,
            reply_to=reply_to,
            target={**egress_target(source), **route},
            files=attached,
        )
        return self._tools(ctx)

    async def discard(self, outcome: TurnOutcome) -> None:
        """A finished turn whose result will not be recorded (stopped meanwhile): close its preview."""
        for draft in outcome.outbox:
            preview = draft.target.get(PREVIEW_KEY)
            adapter = self._adapters.get(draft.platform)
            if preview and adapter is not None and adapter.capabilities.edit:
                await close_preview(
                    adapter,  # type: ignore[arg-type]
                    draft.chat_id,
                    str(preview),
                    draft.text + STOPPED_SUFFIX,
                    {k: str(v) for k, v in draft.target.items() if k != PREVIEW_KEY},
                )

    async def _reply(self, request: AgentRequest, consumer: StreamConsumer, images: MadeFiles) -> _Reply:
        steps = ToolSteps()  # what the agent did, kept with the reply (even a timed-out one)
        try:
            async with asyncio.timeout(self.settings.timeout_seconds):
                text, outcome, usage = await self._stream(request, consumer, steps, images)
                text = images.note(text) if outcome == "ok" else text
        except TimeoutError:
            error_id = new_error_id()
            text = turn_timeout_apology(self.settings.timeout_seconds, error_id)
            outcome, usage = "timeout", None
            log.warning(
                "the agent did not finish within %.0f s [%s]", self.settings.timeout_seconds, error_id,
                extra={"session_key": request.session_key, "error_id": error_id, "will_retry": False},
            )  # fmt: skip
        except BaseException:  # cancelled, or the agent raised: no preview keeps its cursor
            await asyncio.shield(consumer.interrupted())
            raise
        finally:
            await asyncio.shield(consumer.close())
        return _Reply(text, outcome, consumer.state.message_id, usage, steps.dumps())

    async def _stream(
        self, request: AgentRequest, consumer: StreamConsumer, steps: ToolSteps, images: MadeFiles
    ) -> tuple[str, str, Usage | None]:
        await consumer.begin()
        so_far = ""
        calls: dict[str, ToolCall] = {}
        async for event in self._agent.stream(request):
            if isinstance(event, TextDelta):
                so_far += event.text
                await consumer.update(so_far)
            elif isinstance(event, Final):
                return event.text, "ok", event.usage
            elif isinstance(event, ImageMade):  # sent after the reply, as an attached file is
                await images.take(event.data)
            elif isinstance(event, AgentFailed):
                # One line per failure, for the operator; the user reads a short reason and the id.
                # The gateway never resends a failed turn: ``transient`` says a resend could work.
                error_id = new_error_id()
                log.warning(
                    "the agent failed [%s] (%s): %s", Shown(error_id), Shown(event.kind), event.message,
                    extra={"session_key": request.session_key, "error_id": error_id,
                           "kind": event.kind, "transient": event.retryable, "will_retry": False},
                )  # fmt: skip
                return apology(event.kind, error_id), OUTCOMES[event.kind], None
            elif isinstance(event, ToolStarted):  # a prompt (if any) is the approval broker's
                await consumer.tasks.started(event.call)
                steps.started(event.call)
                if self.settings.tool_progress and consumer.status_lines:
                    calls[event.call.call_id] = event.call
                    await consumer.update(with_status(so_far, started_line(event.call)), force=True)
            elif isinstance(event, ToolFinished):  # the result itself is in the final
                await consumer.tasks.finished(event.result)
                steps.finished(event.result)
                if self.settings.tool_progress and consumer.status_lines:
                    status = finished_line(calls.pop(event.result.call_id, None), event.result)
                    await consumer.update(with_status(so_far, status), force=True)
        error_id = new_error_id()
        log.warning(
            "the agent ended its stream without an answer [%s]", Shown(error_id),
            extra={"session_key": request.session_key, "error_id": error_id, "will_retry": False},
        )  # fmt: skip
        return so_far or apology("failed", error_id), "agent_error", None
