"""``python -m chatgate``: the same command line as ``chatgate``."""

import sys

from chatgate.app.cli.entry import main

sys.exit(main())
