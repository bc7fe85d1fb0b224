"""``python -m chatgate``: the same command line as ``chatgate``."""

import sys

from chatgate.app.cli import main

sys.exit(main())
