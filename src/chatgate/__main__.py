"""``python -m chatgate``: the same command line as ``chatgate``."""

import sys

from chatgate.app.cli.main import main

sys.exit(main())
