"""Webhooks in: a signed delivery becomes one inbox event (or, deliver-only, one outbox row).

The order is the contract: the route, the size, the secret (401 and nothing stored), the
delivery id, the JSON; then the commit, and only after it a 200. The event's dedupe key is
``(hook:<route>, <delivery id header>)``, so a sender retrying the same delivery is answered
200 each time and the agent runs once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.schedules import ScheduleTarget
from chatgate.domain.store_roles import OutboxNotices, Transcript
from chatgate.domain.webhooks import MAX_DELIVERY_ID, bearer_valid, hmac_valid, render_prompt
from chatgate.engine.intake import AdmissionRefused
from chatgate.engine.replies import reply_draft
from chatgate.engine.schedules import InternalAdmission, resolve_target

log = logging.getLogger(__name__)

REFUSAL_LOG_SECONDS = 10.0


class HookStore(Transcript, OutboxNotices, Protocol):
    """A session target is resolved from its stored source; deliver-only text goes to the outbox."""


@dataclass(frozen=True, slots=True)
class HookRoute:
    name: str
    auth: Literal["hmac", "bearer"]
    secret: bytes
    target: ScheduleTarget
    template: str = "Webhook $route: $body"
    signature_header: str = "X-Hub-Signature-256"
    signature_prefix: str = "sha256="
    delivery_header: str = "X-Delivery-Id"
    deliver_only: bool = False
    max_body_bytes: int = 256 * 1024

    def __repr__(self) -> str:  # never the secret, in a log line or a traceback
        return f"HookRoute({self.name!r}, {self.auth})"


@dataclass(frozen=True, slots=True)
class HookAnswer:
    status: int
    body: dict[str, Any]


def _error(status: int, code: str, message: str) -> HookAnswer:
    return HookAnswer(status, {"error": code, "message": message})


class Webhooks:
    """The routes, and what one request to a route gets."""

    def __init__(
        self,
        routes: Mapping[str, HookRoute],
        store: HookStore,
        admission: InternalAdmission,
        on_outbox: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.routes = dict(routes)
        self._store = store
        self._admission = admission
        self._on_outbox = on_outbox
        self._clock = clock
        self._refusals: dict[str, tuple[float, int]] = {}
        """Per route: when a refusal was last logged, and how many were not logged since."""

    def _log_refusal(self, route: str) -> None:
        """One line per route per ``REFUSAL_LOG_SECONDS`` with the count: strangers cannot flood the log."""
        now = self._clock()
        last, unlogged = self._refusals.get(route, (float("-inf"), 0))
        if now - last < REFUSAL_LOG_SECONDS:
            self._refusals[route] = (last, unlogged + 1)
            return
        more = f"; {unlogged} more since the last such line" if unlogged else ""
        log.warning("webhook %s: refused a request with a missing or wrong secret (401)%s", route, more)
        self._refusals[route] = (now, 0)

    def authentic(self, route: HookRoute, headers: Mapping[str, str], body: bytes) -> bool:
        if route.auth == "bearer":
            return bearer_valid(route.secret, headers.get("authorization"))
        return hmac_valid(
            route.secret, body, headers.get(route.signature_header.lower()), route.signature_prefix
        )

    async def receive(self, route: HookRoute, headers: Mapping[str, str], body: bytes) -> HookAnswer:
        """``headers`` with lower-case names; ``body`` already bounded by ``max_body_bytes``."""
        if not self.authentic(route, headers, body):
            self._log_refusal(route.name)
            return _error(401, "unauthorized", f"sign the body as route {route.name!r} is configured to")
        delivery = (headers.get(route.delivery_header.lower()) or "").strip()
        if not delivery or len(delivery) > MAX_DELIVERY_ID:
            return _error(
                400, "no_delivery_id", f"send a delivery id (1-200 chars) in {route.delivery_header}"
            )
        try:
            payload = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            log.warning("webhook %s: delivery %s is not JSON: %s", route.name, delivery, exc)
            return _error(400, "invalid_json", f"the body must be JSON: {exc}")
        try:
            return await self._commit(route, delivery, payload)
        except StoreUnavailable as exc:
            log.warning("webhook %s: delivery %s not stored: %s (503; retry it)", route.name, delivery, exc)
            return _error(503, "storage_unavailable", "not stored; send the same delivery again later")

    async def _commit(self, route: HookRoute, delivery: str, payload: Any) -> HookAnswer:
        found = await resolve_target(route.target, self._store, self._admission.key_for_source)
        if found is None:
            log.warning(
                "webhook %s: delivery %s has no route: session %s does not exist; nothing was stored",
                route.name,
                delivery,
                route.target.session_key,
            )
            return _error(409, "no_route", "the route's target session does not exist (yet)")
        source, key = found
        text = render_prompt(route.template, route.name, payload)
        if route.deliver_only:
            idem = f"hook:{route.name}:{delivery}"
            duplicate = await self._store.outbox_status(idem) is not None
            await self._store.enqueue_outbox([reply_draft(source, key, "notice", text, idem, None)])
            self._on_outbox()
            return HookAnswer(200, {"status": "delivered", "duplicate": duplicate})
        inbound = Inbound(
            transport=f"hook:{route.name}",
            delivery_id=delivery,
            source=source,
            text=text,
            payload={"hook": {"route": route.name, "delivery": delivery}},
            observes_labels=False,
        )
        try:
            admitted = await self._admission.admit_internal(inbound, key)
        except AdmissionRefused as exc:
            return _error(422, exc.code, exc.message)
        return HookAnswer(200, {"status": "admitted", "duplicate": not admitted.new, "seq": admitted.seq})
