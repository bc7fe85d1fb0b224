"""What the web chat declares to the engine: drafts, buttons, receipts, and the agent's files
as links to the blob store."""

from __future__ import annotations

from chatgate.domain.outbound import Capabilities

WEB_FILE_MAX_BYTES = 100_000_000
"""The largest file the agent sends a web chat (as a download link; ``tools.attach_max_bytes``
bounds it first)."""


def web_capabilities(draft_interval: float, files: bool) -> Capabilities:
    """``files``: the agent's files are links to the blob store; without media (no store) none."""
    return Capabilities(
        drafts=True,
        buttons=True,
        max_length=1_000_000,
        confirms_receipt=True,
        draft_interval=draft_interval,
        max_upload_bytes=WEB_FILE_MAX_BYTES if files else 0,
    )
