"""The garbage collector rests while the process starts, then skips what the start made.

A start builds a few hundred thousand objects (the modules, the config, the store, the
platform's client library) that live as long as the process. The collector finds nothing to
free among them, yet its passes during the start cost a Discord gateway about a tenth of its
time to IDENTIFY (0.57 s against 0.51 s, ``bench/platform_cpu.py``), and every later full
pass walks them again. So the command's entry holds the collector (``hold``); once the start
is over, ``release`` collects what the start threw away, moves the survivors to the
permanent generation (``gc.freeze``: never walked again) and lets the collector run.

Only the command's entry holds it: importing the CLI (as the tests do) leaves it alone.
"""

from __future__ import annotations

import gc

AFTER_START_SECONDS = 2.0
"""How long after ``Gateway.start`` returned ``run`` releases the collector: the platforms
connect in tasks of their own, and their handshakes should not wait for the one full pass."""

_held = False


def hold() -> None:
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release() -> None:
    """End the start: collect once, freeze the survivors, collect as usual from now on."""
    global _held
    if not _held:
        return
    _held = False
    gc.collect()
    gc.freeze()
    gc.enable()
