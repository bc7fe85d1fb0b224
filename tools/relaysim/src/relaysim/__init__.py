"""A local relay connector simulator (the connector side of the Hermes relay contract v1).

``RelaySimulator`` is the in-process API for tests; ``chatgate-relay-sim`` runs it
from the command line (``relaysim.cli``). A test tool, not part of chatgate: it may
import chatgate's public pieces, and chatgate never imports it.
"""

from relaysim.auth import TokenRejected, make_token, verify_token
from relaysim.server import RelaySimulator

__all__ = ["RelaySimulator", "TokenRejected", "make_token", "verify_token"]
