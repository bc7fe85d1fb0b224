"""Relay fixtures: the ``world`` (a simulator and gateways dialing it) lives in support.relay_harness."""

from support.relay_harness import world

__all__ = ["world"]
