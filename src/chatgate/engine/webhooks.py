"""Webhooks in: a signed delivery becomes one inbox event (or, deliver-only, one outbox row).

The order is the contract: the route, the size, the delivery id and timestamp, the secret
(401 and nothing stored), the timestamp's window, the JSON; then the commit, and only after
it a 200. The event's dedupe key is ``(hook:<route>, <delivery id header>)``, so a sender
retrying the same delivery is answered 200 each time and the agent runs once.

An ``hmac`` route's signature covers ``<timestamp>.<delivery id>.<body>``: a captured
delivery sent again under a new delivery id does not verify, and one signed more than
``max_age_seconds`` from now is stale, so a replay is either the same delivery (run once)
or refused. Every refusal is logged within a budget (``LogBudget``): strangers cannot
flood the log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

import msgspec

from chatgate.domain import bounded_json
from chatgate.domain.bounded_json import BadJson
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.inbound import Inbound
from chatgate.domain.log_budget import LogBudget
from chatgate.domain.schedules import ScheduleTarget
from chatgate.domain.store_roles import OutboxNotices, Transcript
from chatgate.domain.webhooks import (
    MAX_DELIVERY_ID,
    bearer_valid,
    hmac_valid,
    render_prompt,
    signed_message,
    timestamp_of,
)
from chatgate.engine.intake import AdmissionRefused
from chatgate.engine.replies import reply_draft
from chatgate.engine.schedules import InternalAdmission, resolve_target

log = logging.getLogger(__name__)


class HookStore(Transcript, OutboxNotices, Protocol):
    """A session target is resolved from its stored source; deliver-only text goes to the outbox."""


class HookRoute(msgspec.Struct, frozen=True):
    name: str
    auth: Literal["hmac", "bearer"]
    secret: bytes
    target: ScheduleTarget
    template: str = "Webhook $route: $body"
    signature_header: str = "X-Chatgate-Signature"
    signature_prefix: str = "sha256="
    delivery_header: str = "X-Delivery-Id"
    timestamp_header: str = "X-Chatgate-Timestamp"
    max_age_seconds: float = 300.0
    deliver_only: bool = False
    max_body_bytes: int = 256 * 1024

    def __repr__(self) -> str:  # never the secret, in a log line or a traceback
        return f"HookRoute({self.name!r}, {self.auth})"


class HookAnswer(msgspec.Struct, frozen=True):
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
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.routes = dict(routes)
        self._store = store
        self._admission = admission
        self._on_outbox = on_outbox
        self._now = wall_clock
        self.refusals = LogBudget(log, clock=clock)
        """One budget per route and reason (the route names are the config's, never a sender's)."""

    def _refuse(self, route: HookRoute, answer: HookAnswer) -> HookAnswer:
        error = answer.body["error"]
        self.refusals.warning(
            f"webhook {route.name}: {error}",
            "webhook %s: refused a delivery (%d %s): %s",
            route.name,
            answer.status,
            error,
            answer.body["message"],
        )
        return answer

    def authentic(self, route: HookRoute, headers: Mapping[str, str], body: bytes) -> bool:
        """The secret checks out; for ``hmac``, over the timestamp, the delivery id and the body."""
        if route.auth == "bearer":
            return bearer_valid(route.secret, headers.get("authorization"))
        message = signed_message(
            headers.get(route.timestamp_header.lower(), "").strip(),
            headers.get(route.delivery_header.lower(), "").strip(),
            body,
        )
        return hmac_valid(
            route.secret, message, headers.get(route.signature_header.lower()), route.signature_prefix
        )

    def _checked(self, route: HookRoute, headers: Mapping[str, str], body: bytes) -> HookAnswer | str:
        """The delivery id of a request that may be stored, or the answer refusing it."""
        delivery = (headers.get(route.delivery_header.lower()) or "").strip()
        if route.auth == "bearer" and not self.authentic(route, headers, body):
            return _error(401, "unauthorized", f"send Authorization: Bearer <the secret of {route.name!r}>")
        if not delivery or len(delivery) > MAX_DELIVERY_ID:
            return _error(
                400, "no_delivery_id", f"send a delivery id (1-200 chars) in {route.delivery_header}"
            )
        if route.auth == "bearer":
            return delivery
        sent = timestamp_of(headers.get(route.timestamp_header.lower()))
        if sent is None:
            return _error(
                400, "no_timestamp", f"send the Unix time in seconds (digits) in {route.timestamp_header}"
            )
        if not self.authentic(route, headers, body):
            return _error(
                401,
                "unauthorized",
                f"sign '<timestamp>.<delivery id>.<body>' with the secret of {route.name!r}"
                f" (HMAC-SHA256, hex) in {route.signature_header}",
            )
        skew = abs(self._now() - sent)
        if skew > route.max_age_seconds:
            return _error(
                401,
                "stale_delivery",
                f"the timestamp is {skew:.0f} s from the gateway's clock; the window is"
                f" {route.max_age_seconds:.0f} s: sign each delivery (and each retry) when it is sent",
            )
        return delivery

    async def receive(self, route: HookRoute, headers: Mapping[str, str], body: bytes) -> HookAnswer:
        """``headers`` with lower-case names; ``body`` already bounded by ``max_body_bytes``."""
        checked = self._checked(route, headers, body)
        if isinstance(checked, HookAnswer):
            return self._refuse(route, checked)
        delivery = checked
        try:
            payload = bounded_json.parse(body)
        except BadJson as exc:
            return self._refuse(route, _error(400, "invalid_json", f"the body must be JSON: {exc.reason}"))
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
