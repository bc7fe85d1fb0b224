"""The ``chatgate`` command as a process starts it (the console script, ``python -m``)."""

from __future__ import annotations

from chatgate.app.cli import collector


def main() -> int:
    collector.hold()
    from chatgate.app.cli.main import main as cli_main  # after hold: imports are most of a start's objects

    return cli_main()
