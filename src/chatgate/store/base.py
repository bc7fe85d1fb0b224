"""The Store protocol: every role of ``chatgate.domain.store_roles`` at once.

A backend implements all of it; only the composition root (``app``) holds a ``Store``.
Every other part is typed with the narrow role it uses.
"""

from __future__ import annotations

from typing import Protocol

from chatgate.domain.store_roles import (
    Accounts,
    ApiKeys,
    Approvals,
    Cursors,
    Exchanges,
    FleetView,
    Inbox,
    Labels,
    Leases,
    Lifecycle,
    Media,
    Outbox,
    Pairing,
    Schedules,
    SessionProfiles,
    Tasks,
    Transcript,
    WebChats,
)


class Store(
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
    Protocol,
):
    """The whole durable state of a gateway."""
