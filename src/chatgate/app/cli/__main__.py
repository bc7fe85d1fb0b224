"""``python -m chatgate.app.cli``: the ``chatgate`` command (tests and benchmarks launch it so)."""

import contextlib
import sys

from chatgate.app.cli.entry import main

with contextlib.suppress(KeyboardInterrupt):
    sys.exit(main())
