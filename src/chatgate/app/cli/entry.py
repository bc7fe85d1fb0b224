"""The ``chatgate`` command as a process starts it (the console script, ``python -m``)."""

from __future__ import annotations

from chatgate.app.cli import collector


def main() -> int:
    collector.hold()  # before the imports: they are most of what a start allocates
    from chatgate.app.cli.main import main as cli_main

    return cli_main()
