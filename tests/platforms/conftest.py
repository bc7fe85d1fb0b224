"""Fixtures for the platform suites; the harness itself lives in support.web_harness."""

from support.web_harness import _no_chatgate_env, connect_client, start_gateway

__all__ = ["_no_chatgate_env", "connect_client", "start_gateway"]
