"""``python -m relaysim``: the same as the ``chatgate-relay-sim`` command."""

import contextlib
import sys

from relaysim.cli import main

with contextlib.suppress(KeyboardInterrupt):
    sys.exit(main())
