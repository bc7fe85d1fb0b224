"""The gateway's Prometheus metrics, on a registry of its own.

A registry per gateway (not the process-global one) lets several gateways run
in one test process without colliding.
"""

from __future__ import annotations

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

_LAG_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # The process's own figures (CPU, RSS, open descriptors, GC, Python version), as an
        # operator's dashboards expect them next to ours. They read /proc at scrape time.
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            r.register(collector)
        self.admitted = Counter("chatgate_admitted", "Inbound events committed", ["platform"], registry=r)
        self.duplicates = Counter(
            "chatgate_duplicates", "Redeliveries recognized and not run again", ["platform"], registry=r
        )
        self.refused = Counter(
            "chatgate_refused", "Inbound events refused at admission", ["platform", "code"], registry=r
        )
        self.turns = Counter("chatgate_turns", "Agent turns by outcome", ["outcome"], registry=r)
        self.turn_seconds = Histogram("chatgate_turn_seconds", "Turn duration", registry=r)
        self.deliveries = Counter(
            "chatgate_deliveries", "Outbox delivery attempts by outcome", ["platform", "outcome"], registry=r
        )
        self.queue_depth = Gauge("chatgate_queue_depth", "Admitted events not yet processed", registry=r)
        self.loop_lag = Histogram(
            "chatgate_event_loop_lag_seconds", "Event-loop scheduling lag", buckets=_LAG_BUCKETS, registry=r
        )
        self.loop_lag_max = Gauge(
            "chatgate_event_loop_lag_max_seconds", "Worst lag in the last window", registry=r
        )
        self.commit_seconds = Histogram("chatgate_store_commit_seconds", "Store transaction time", registry=r)
        self.commit_batch = Histogram(
            "chatgate_store_commit_batch",
            "Writes per commit",
            buckets=(1, 2, 4, 8, 16, 64, 256, 512),
            registry=r,
        )

        self.admission_seconds = Histogram(
            "chatgate_admission_seconds",
            "Time to admit an inbound event (through commit)",
            ["platform"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )
        self.delivery_seconds = Histogram(
            "chatgate_delivery_seconds",
            "Time from a reply being recorded to the platform accepting it",
            ["platform", "kind"],
            registry=r,
        )
        self.preview_updates = Counter(
            "chatgate_preview_updates",
            "Streaming preview sends and edits acknowledged by the platform",
            ["platform", "op"],
            registry=r,
        )
        self.undelivered_replies, self.oldest_undelivered_seconds, self.stuck_replies = _reply_gauges(r)
        self.adapter_connected = Gauge(
            "chatgate_adapter_connected",
            "1 when the adapter is connected to its platform",
            ["platform"],
            registry=r,
        )

    def observe_commit(self, writes: int, seconds: float) -> None:
        """Called from the writer thread; prometheus_client metrics are thread-safe."""
        self.commit_batch.observe(writes)
        self.commit_seconds.observe(seconds)


def _reply_gauges(r: CollectorRegistry) -> tuple[Gauge, Gauge, Gauge]:
    """The outbox's backlog as ``engine/stuck_replies.py`` reads it."""
    return (
        Gauge("chatgate_undelivered_replies", "Replies recorded and not yet delivered", registry=r),
        Gauge(
            "chatgate_oldest_undelivered_seconds",
            "Age of the oldest reply not yet delivered (0: none)",
            registry=r,
        ),
        Gauge(
            "chatgate_stuck_replies",
            "Replies at the head of their chat for over 2 minutes, claimed or due, and not delivered",
            registry=r,
        ),
    )
