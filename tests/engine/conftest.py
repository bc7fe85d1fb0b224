"""Fixtures for the engine suite; the harness itself lives in support.engine_harness."""

from support.engine_harness import make_harness, transcript_faults, wait

__all__ = ["make_harness", "transcript_faults", "wait"]
