"""A small stdio MCP server for the MCP tool tests, written with the official SDK.

Tools: ``echo`` (read-only), ``write_note`` (destructive: appends to a file), ``big``
(returns many bytes), ``die`` (the process exits mid-call: a crash), ``pid`` (its process id),
``sleep`` (a slow call), ``unannotated`` (no annotations: fail closed), ``picture`` (a PNG as an
image block, a PDF claiming to be one, a WAV as audio, a CSV as an embedded resource). ``MCP_PROBE_LOG``
names a file each call is appended to, so a test can tell whether a call ran. ``--http PORT``
serves it over streamable HTTP instead of stdio.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("probe")
READ_ONLY = ToolAnnotations(readOnlyHint=True)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True)


def _log(line: str) -> None:
    path = os.environ.get("MCP_PROBE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Say the text back."""
    _log(f"echo {text}")
    return f"echo: {text}"


@server.tool(annotations=DESTRUCTIVE)
def write_note(text: str) -> str:
    """Append a note (destructive)."""
    _log(f"write_note {text}")
    return "written"


@server.tool(annotations=READ_ONLY)
def big(size: int) -> str:
    """Return ``size`` bytes of x."""
    _log(f"big {size}")
    return "x" * size


@server.tool(annotations=READ_ONLY)
def die() -> str:
    """Exit the server process mid-call (a crash)."""
    _log(f"die {os.getpid()}")
    sys.stdout.flush()
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def pid() -> str:
    """This server process's id."""
    _log("pid")
    return str(os.getpid())


@server.tool(annotations=READ_ONLY)
async def sleep(seconds: float) -> str:
    """Answer after ``seconds`` (a slow call, to be timed out or cancelled)."""
    _log(f"sleep {seconds}")
    await anyio.sleep(seconds)
    return "slept"


@server.tool()
def unannotated() -> str:
    """A tool without annotations (fail closed: ask)."""
    _log("unannotated")
    return "ran"


@server.tool(annotations=READ_ONLY)
def picture(red: int) -> list[Any]:
    """A line of text, a ``red``-tinted 40x30 PNG as an image block, a PDF that claims to be one,
    a short WAV as an audio block, and a CSV as an embedded binary resource."""
    import base64

    from mcp.types import AudioContent, BlobResourceContents, EmbeddedResource, ImageContent, TextContent

    from support.media_files import pdf, png, wav_tone

    _log(f"picture {red}")
    image, fake, sound = png(40, 30, (red, 0, 0)), pdf("not a picture"), wav_tone()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    table = BlobResourceContents(uri="file:///out/report.csv", blob=b64(b"a,b\n1,2\n"), mimeType="text/csv")
    return [
        TextContent(type="text", text="a picture"),
        ImageContent(type="image", data=b64(image), mimeType="image/png"),
        ImageContent(type="image", data=b64(fake), mimeType="image/png"),
        AudioContent(type="audio", data=b64(sound), mimeType="audio/wav"),
        EmbeddedResource(type="resource", resource=table),
    ]


def run_http(port: int) -> None:
    """Serve over streamable HTTP on 127.0.0.1:``port``, logging each ``Authorization`` header."""
    import uvicorn

    app = server.streamable_http_app()

    async def logged(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization")
            if auth:
                _log("auth " + auth.decode())
        await app(scope, receive, send)

    uvicorn.run(logged, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        run_http(int(sys.argv[2]))
    else:
        server.run("stdio")
