"""The web chat's HTML pages (the chat at ``/``, the sign-in page) and the headers they are served with."""

from __future__ import annotations

import html
from importlib import resources

# The pages load only their own assets and talk only to their own gateway, so a model reply
# that slipped past the renderer still could not run script or reach another host.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; worker-src 'self'; style-src 'self'; img-src 'self'; "
        "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def page(name: str) -> str:
    return resources.files("chatgate.platforms.webchat").joinpath(f"static/{name}").read_text("utf-8")


def chat_page(auth: str, agent_name: str = "") -> str:
    """The chat page, told which sign-in this gateway uses (``none``, ``token``, ``accounts``)
    and the agent's name (``platforms.web.agent_name``, escaped: the page reads it as text)."""
    name = f' data-agent-name="{html.escape(agent_name, quote=True)}"' if agent_name else ""
    return page("index.html").replace("<body>", f'<body data-auth="{auth}"{name}>', 1)
