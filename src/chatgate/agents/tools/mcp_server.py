"""One MCP server, owned: started (or connected), its tools listed, restarted when it fails.

The official ``mcp`` SDK is imported here only, and only when a server is started, so a
gateway without MCP servers never pays for its import (measured: about 0.5 s of CPU
and 55 MB of RSS, docs/agents.md).

The SDK's transports are anyio context managers that must be entered and left in one task,
so each server has one owning task (``_run``): it connects, lists the tools, then keeps the
connection until it is lost (a call fails with a closed connection, a liveness ping fails)
and connects again after a backoff. Calls come from turns' tasks and share the session.
Leaving the stdio transport closes the server's stdin, then terminates and reaps its
process tree (the SDK bounds each wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import msgspec

from chatgate.agents.model_images import MAX_IMAGES, base64_bytes
from chatgate.agents.tools.mcp_settings import McpServerSettings, Policy, bounded, function_name, tool_policy
from chatgate.domain.tasks import cancel_and_wait

if TYPE_CHECKING:
    from mcp import ClientSession

log = logging.getLogger(__name__)

CONNECTION_CLOSED = -32000
"""The JSON-RPC code the SDK gives a request whose connection closed under it."""
MAX_TOOLS = 256
"""Tools offered per server (a listing longer than this is cut, with a warning)."""
CLOSE_GRACE_S = 10.0
"""Beyond the connect timeout, how long a close may take (the SDK's own bounds sum to ~6 s)."""


class McpTool(msgspec.Struct, frozen=True):
    """One tool as the model sees it (``exposed``) and as its server names it (``name``)."""

    server: str
    name: str
    exposed: str
    description: str
    parameters: dict[str, Any]
    annotations: dict[str, Any] | None
    policy: Policy
    by_operator: bool = False
    """The policy is the operator's (``tools`` or ``policy``), not the annotations' tier."""

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.exposed,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolFile(msgspec.Struct, frozen=True):
    """Bytes a tool produced: an image or audio block, or an embedded binary resource (``file``,
    named by its URI's last segment)."""

    kind: str
    data: bytes
    name: str | None = None


class McpOutcome(msgspec.Struct, frozen=True):
    """What a call gave the model: the (bounded) text, and whether the tool succeeded."""

    text: str
    ok: bool
    files: tuple[ToolFile, ...] = ()
    """The files the result carried (at most ``MAX_IMAGES``): the engine sends them to the user."""


class McpServerOwner:
    """Owns one server's connection and its task; ``call`` never raises for a server's failure."""

    def __init__(self, settings: McpServerSettings) -> None:
        self.settings = settings
        self._tools: tuple[McpTool, ...] = ()
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._lost = asyncio.Event()
        self._stop = asyncio.Event()
        self._tried = asyncio.Event()
        """Set once the first attempt ended, reached or not: ``start`` need not wait longer."""
        self._task: asyncio.Task[None] | None = None
        self._failures = 0
        self.connects = 0
        """Successful connections so far (1 after start; each restart adds one)."""

    @property
    def name(self) -> str:
        return self.settings.name

    def status(self) -> dict[str, Any]:
        """For ``chatgate status``: connected now, tools offered, restarts so far."""
        return {
            "connected": self._ready.is_set(),
            "tools": len(self._tools),
            "restarts": max(0, self.connects - 1),
        }

    def tools(self) -> tuple[McpTool, ...]:
        """The tools of the latest listing (empty until the server was reached once)."""
        return self._tools

    async def start(self) -> bool:
        """Start the owning task; wait (bounded) for the first listing. False: not reached yet
        (the task keeps trying with backoff; the tools appear once it succeeds)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"chatgate-mcp-{self.name}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_first(self._ready, self._tried), self.settings.connect_timeout_s)
        if not self._ready.is_set():
            log.warning("MCP server %r not reached at start; retrying in the background", self.name)
        return self._ready.is_set()

    async def close(self) -> None:
        """Stop the owning task: the connection is closed and a stdio server reaped.

        Asked, not cancelled, first: the SDK's stdio shutdown (close stdin, wait, terminate,
        kill, each bounded) runs to the end; cancelled only if that overruns its bound."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), self.settings.connect_timeout_s + CLOSE_GRACE_S)
        except TimeoutError:
            log.warning("MCP server %r did not stop in time; cancelling its task", self.name)
        except Exception:
            log.exception("MCP server %r task failed", self.name)
        await cancel_and_wait([task])

    # ------------------------------------------------------------ calls

    async def call(self, tool: str, arguments: dict[str, Any]) -> McpOutcome:
        """Call ``tool``; a timeout, a lost connection or a tool's error is a failed outcome."""
        settings = self.settings
        session: ClientSession | None = None
        try:
            async with asyncio.timeout(settings.timeout_s):
                session = await self._connected()
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            if session is None:
                return McpOutcome(
                    f"not run: the MCP server {self.name!r} is not reachable (restarting)", False
                )
            return McpOutcome(
                f"the MCP server {self.name!r} did not answer within {settings.timeout_s:g} s", False
            )
        except Exception as exc:
            if not _connection_lost(exc):
                return McpOutcome(f"the MCP server {self.name!r} refused the call: {exc}", False)
            self._mark_lost(session, exc)
            # The cause (which may name a host or a path) is the operator's, in the log line.
            return McpOutcome(
                f"the MCP server {self.name!r} failed during the call (its connection was lost);"
                " it is being restarted, so a later call may work",
                False,
            )
        self._failures = 0
        # in a thread: decoding a result's files is up to 8 x 20 MB of base64
        return await asyncio.to_thread(
            render_result, result.model_dump(mode="json", by_alias=True), settings.output_cap
        )

    async def _connected(self) -> ClientSession:
        while True:
            session = self._session
            if session is not None and not self._lost.is_set():
                return session
            await self._ready.wait()

    def _mark_lost(self, session: ClientSession | None, exc: BaseException) -> None:
        if self._stop.is_set():
            return  # closing: the connection ends on purpose, nothing restarts
        if session is not None and session is self._session and not self._lost.is_set():
            log.warning("MCP server %r: connection lost (%s); restarting it", self.name, reason(exc))
            self._ready.clear()  # later calls wait for the new connection
            self._lost.set()

    # ------------------------------------------------------------ the owning task

    async def _run(self) -> None:
        low, high = self.settings.restart_backoff_s
        while not self._stop.is_set():
            try:
                await self._serve_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("MCP server %r failed: %s", self.name, reason(exc))
            finally:
                self._session = None
                self._ready.clear()
                self._tried.set()
            delay = min(high, low * 2 ** min(self._failures, 16))
            self._failures += 1
            if self._stop.is_set():
                return
            log.info("MCP server %r: restarting in %g s", self.name, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _serve_once(self) -> None:
        from mcp import ClientSession

        async with contextlib.AsyncExitStack() as stack:
            streams = await stack.enter_async_context(self._transport())
            session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
            async with asyncio.timeout(self.settings.connect_timeout_s):
                await session.initialize()
                self._tools = await self._list(session)
            self.connects += 1
            self._lost.clear()
            self._session = session
            self._ready.set()
            log.info(
                "MCP server %r ready (%s): %d tool(s): %s",
                self.name,
                self.settings.transport,
                len(self._tools),
                ", ".join(t.exposed for t in self._tools),
            )
            await self._watch(session)

    async def _watch(self, session: ClientSession) -> None:
        """Until the connection is lost (a failed call says so, or an idle ping fails) or ``close``."""
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(_first(self._lost, self._stop), self.settings.ping_interval_s)
                return
            except TimeoutError:
                pass
            try:
                async with asyncio.timeout(self.settings.connect_timeout_s):
                    await session.send_ping()
            except Exception as exc:
                log.warning("MCP server %r did not answer a ping (%s); restarting it", self.name, reason(exc))
                return

    def _transport(self) -> contextlib.AbstractAsyncContextManager[Any]:
        settings = self.settings
        if settings.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=settings.command, args=list(settings.args), env=dict(settings.env), cwd=settings.cwd
            )
            return stdio_client(params)
        assert settings.url is not None
        return _http(settings.url, dict(settings.headers))

    async def _list(self, session: ClientSession) -> tuple[McpTool, ...]:
        from mcp.types import PaginatedRequestParams

        found: list[McpTool] = []
        cursor: str | None = None
        while len(found) < MAX_TOOLS:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = (await session.list_tools(params=params)).model_dump(mode="json", by_alias=True)
            found.extend(self._tool(t) for t in page.get("tools", []))
            cursor = page.get("nextCursor")
            if not cursor:
                break
        if len(found) > MAX_TOOLS or cursor:
            log.warning(
                "MCP server %r lists more than %d tools; only the first are offered", self.name, MAX_TOOLS
            )
        return tuple(found[:MAX_TOOLS])

    def _tool(self, raw: dict[str, Any]) -> McpTool:
        name = str(raw["name"])
        annotations = raw.get("annotations") or None
        schema = raw.get("inputSchema") or {"type": "object", "properties": {}}
        return McpTool(
            server=self.name,
            name=name,
            exposed=function_name(self.name, name),
            description=str(raw.get("description") or raw.get("title") or name)[:1024],
            parameters=schema,
            annotations=annotations,
            policy=tool_policy(self.settings, name, annotations),
            by_operator=name in self.settings.tools or self.settings.policy is not None,
        )


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


async def _first(*events: asyncio.Event) -> None:
    """Return once any of ``events`` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


def reason(exc: BaseException) -> str:
    """An exception as one line; a task group's first failure rather than "unhandled errors"."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _connection_lost(exc: BaseException) -> bool:
    """A failure of the connection (restart the server), not the tool's own error."""
    code = getattr(exc, "code", None)
    if type(exc).__name__ == "MCPError" and isinstance(code, int):
        return code == CONNECTION_CLOSED
    return True


def render_result(result: dict[str, Any], cap: int) -> McpOutcome:
    """A ``CallToolResult`` (wire form) as text for the model: text blocks as they are, other
    blocks described, structured content as JSON when there is no text; at most ``cap`` bytes.
    The bytes of image and audio blocks and of embedded binary resources are kept too
    (``McpOutcome.files``, at most ``MAX_IMAGES``), for the user."""
    parts: list[str] = []
    files: list[ToolFile] = []
    for block in result.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            _keep(files, kind, str(block.get("data", "")), None)
            parts.append(
                f"[{kind} {block.get('mimeType', '')}, {len(block.get('data', ''))} base64 characters]"
            )
        elif kind == "resource":
            resource = block.get("resource") or {}
            if isinstance(resource.get("blob"), str):
                _keep(files, "file", resource["blob"], str(resource.get("uri") or ""))
            parts.append(str(resource.get("text") or f"[resource {resource.get('uri', '')}]"))
        elif kind == "resource_link":
            parts.append(f"[resource link {block.get('uri', '')}]")
        else:
            parts.append(f"[{kind} content]")
    structured = result.get("structuredContent")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(parts) or "(no output)"
    if result.get("isError"):
        return McpOutcome(bounded(f"the tool reported an error: {text}", cap), False)
    return McpOutcome(bounded(text, cap), True, tuple(files))


def _keep(files: list[ToolFile], kind: str, data: str, uri: str | None) -> None:
    if len(files) >= MAX_IMAGES:
        return
    decoded = base64_bytes(data)  # bounded, strict base64
    if decoded is not None:
        name = uri.rstrip("/").rsplit("/", 1)[-1] if uri else None
        files.append(ToolFile(kind, decoded, name or None))
