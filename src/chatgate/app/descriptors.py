"""The descriptor budget the HTTP connection cap needs, checked before anything starts.

Kept apart from ``http_guard`` (which imports uvicorn): the check runs first thing at
start-up, and the HTTP stack is imported only after the platforms poll.
"""

from __future__ import annotations

import resource

from chatgate.domain.errors import StartupError

DESCRIPTOR_RESERVE = 128
"""Descriptors kept beyond ``max_connections`` for the database, logs, outbound clients."""


class DescriptorBudgetError(StartupError):
    """The process may open fewer descriptors than the connection cap needs."""


def ensure_descriptors(max_connections: int) -> int:
    """Raise the soft ``RLIMIT_NOFILE`` toward the hard one if the cap needs it; return the limit.

    Past the limit, ``accept()`` fails and nothing new is served, not even ``/readyz``,
    so a cap the process cannot hold is refused at start-up, naming what to change.
    """
    need = max_connections + DESCRIPTOR_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(hard, need)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass  # the kernel's own ceiling (fs.nr_open); the check below says what to do
    if soft != resource.RLIM_INFINITY and soft < need:
        raise DescriptorBudgetError(
            f"http.max_connections is {max_connections} but this process may open only {soft} files"
            f" (it needs {need}: the connections plus {DESCRIPTOR_RESERVE}); lower http.max_connections"
            f" or raise the limit (systemd: LimitNOFILE=, shell: ulimit -n)"
        )
    return int(soft)
