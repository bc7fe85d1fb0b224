"""One IMAP connection on aioimaplib, as the few typed operations the adapter uses.

aioimaplib is imported when a connection opens (the adapter's start), not with the plugin.
Every failure is an ``ImapError`` whose text names no password. The adapter holds two
connections: the reader's (which sits in IDLE) and the outbound side's (Sent folder
searches and appends, a parent mail's headers), because a connection in IDLE can do
nothing else.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import msgspec

from chatgate.domain.errors import ChatgateError

if TYPE_CHECKING:
    from aioimaplib import IMAP4

TIMEOUT = 30.0
_FETCH_LINE = re.compile(rb"^\d+ FETCH \((.*)$", re.DOTALL)
_UID = re.compile(rb"\bUID (\d+)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_DATE = re.compile(rb'\bINTERNALDATE "([^"]+)"')
_EXISTS = re.compile(rb"^\d+ EXISTS$")
_CODE = re.compile(rb"\[(UIDVALIDITY|UIDNEXT) (\d+)\]")


class ImapError(ChatgateError):
    """An IMAP command failed or the connection is gone; safe to log."""


class Selected(msgspec.Struct, frozen=True):
    uidvalidity: int
    uidnext: int


class Envelope(msgspec.Struct, frozen=True):
    uid: int
    size: int
    internaldate: float


class TlsHolder(msgspec.Struct):
    """The TLS context both connections use, made once by the adapter's start (off the loop)."""

    context: ssl.SSLContext | None = None

    def get(self) -> ssl.SSLContext:
        return self.context if self.context is not None else ssl.create_default_context()


class ImapSettings(msgspec.Struct, frozen=True):
    host: str
    port: int
    tls: bool
    user: str
    password: str
    tls_context: TlsHolder


def quoted(text: str) -> str:
    """An IMAP quoted string (mailbox names, search keys)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _internaldate(text: bytes) -> float:
    try:  # "04-Dec-2026 16:11:58 +0000"
        day, month, rest = text.decode().split("-", 2)
        return parsedate_to_datetime(f"{day} {month} {rest}").timestamp()
    except (ValueError, TypeError, IndexError):
        return 0.0


class ImapConnection:
    def __init__(self, settings: ImapSettings) -> None:
        self._settings = settings
        self._client: IMAP4 | None = None
        self.idle_capable = False
        self.move_capable = False
        self.saw_exists = False
        """Set when a command's answer carried an ``EXISTS`` (new mail while we worked): the reader
        looks again instead of entering IDLE, which would not report that mail a second time."""

    async def open(self) -> None:
        import aioimaplib  # the email extra, loaded at start

        s = self._settings
        try:
            if s.tls:
                client: IMAP4 = aioimaplib.IMAP4_SSL(
                    host=s.host, port=s.port, timeout=TIMEOUT, ssl_context=s.tls_context.get()
                )
            else:
                client = aioimaplib.IMAP4(host=s.host, port=s.port, timeout=TIMEOUT)
            self._client = client
            await client.wait_hello_from_server()
            answer = await client.login(s.user, s.password)
        except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
            raise ImapError(f"could not reach {s.host}:{s.port}: {type(exc).__name__}: {exc}") from None
        if answer.result != "OK":
            raise ImapError(f"{s.host} refused the login of {s.user}: {_text(answer.lines)}")
        await self._check(client.protocol.capability(), "CAPABILITY")  # the list after login
        self.idle_capable = client.has_capability("IDLE")
        self.move_capable = client.has_capability("MOVE")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            await asyncio.wait_for(client.logout(), 5)
        except Exception:  # closing a broken connection: nothing left to do
            transport = getattr(client.protocol, "transport", None)
            if transport is not None:
                transport.close()

    @property
    def client(self) -> IMAP4:
        if self._client is None:
            raise ImapError("the IMAP connection is not open")
        return self._client

    async def _check(self, call: Any, what: str) -> Any:
        try:
            answer = await asyncio.wait_for(call, TIMEOUT)
        except (OSError, TimeoutError) as exc:
            raise ImapError(f"{what}: {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # aioimaplib raises its own types and a few plain ones
            raise ImapError(f"{what}: {type(exc).__name__}: {exc}") from None
        if answer is not None and getattr(answer, "result", "OK") != "OK":
            raise ImapError(f"{what} failed: {_text(answer.lines)}")
        for line in getattr(answer, "lines", ()):
            if isinstance(line, bytes) and _EXISTS.match(line):
                self.saw_exists = True
        return answer

    async def select(self, mailbox: str) -> Selected:
        # SELECT, not EXAMINE, even to read: aioimaplib enters its "selected" state only on SELECT
        answer = await self._check(self.client.select(quoted(mailbox)), f"SELECT {mailbox}")
        codes: dict[bytes, int] = {}
        for line in answer.lines:
            if isinstance(line, bytes | bytearray):
                for name, value in _CODE.findall(bytes(line)):
                    codes[name] = int(value)
        if b"UIDVALIDITY" not in codes:
            raise ImapError(f"SELECT {mailbox}: the server named no UIDVALIDITY")
        return Selected(codes[b"UIDVALIDITY"], codes.get(b"UIDNEXT", 0))

    async def search(self, *criteria: str) -> list[int]:
        answer = await self._check(self.client.uid_search(*criteria, charset=None), "UID SEARCH")
        uids: list[int] = []
        for line in answer.lines:
            text = bytes(line) if isinstance(line, bytes | bytearray) else b""
            if text.startswith(b"SEARCH"):
                text = text[6:]
            if re.fullmatch(rb"[\d ]*", text):
                uids.extend(int(u) for u in text.split())
        return sorted(set(uids))

    async def envelopes(self, uids: list[int]) -> list[Envelope]:
        if not uids:
            return []
        answer = await self._check(
            self.client.uid("fetch", _set(uids), "(UID RFC822.SIZE INTERNALDATE)"), "UID FETCH"
        )
        found: list[Envelope] = []
        for line in answer.lines:
            text = bytes(line) if isinstance(line, bytes | bytearray) else b""
            if not _FETCH_LINE.match(text):
                continue
            uid, size, date = _UID.search(text), _SIZE.search(text), _DATE.search(text)
            if uid is not None:
                found.append(
                    Envelope(
                        int(uid.group(1)),
                        int(size.group(1)) if size else 0,
                        _internaldate(date.group(1)) if date else 0.0,
                    )
                )
        return sorted(found, key=lambda e: e.uid)

    async def bodies(self, uids: list[int], part: str = "") -> dict[int, bytes]:
        """``BODY.PEEK[part]`` of each mail (the whole mail by default); a mail gone meanwhile is
        missing from the answer. PEEK: reading a mail does not mark it seen."""
        if not uids:
            return {}
        answer = await self._check(
            self.client.uid("fetch", _set(uids), f"(UID BODY.PEEK[{part}])"), "UID FETCH"
        )
        found: dict[int, bytes] = {}
        current: int | None = None
        pending: bytes | None = None  # a literal whose UID comes after it (``BODY[] {n} ... UID 7)``)
        for line in answer.lines:
            if isinstance(line, bytearray):
                if current is not None:
                    found[current] = bytes(line)
                else:
                    pending = bytes(line)
                continue
            if not isinstance(line, bytes):
                continue
            uid = _UID.search(line)
            if _FETCH_LINE.match(line):
                current, pending = (int(uid.group(1)) if uid else None), None
            elif pending is not None and uid is not None:
                found[int(uid.group(1))] = pending
                pending = None
            else:
                current = None
        return found

    async def append(self, mailbox: str, message: bytes, flags: str = "(\\Seen)") -> None:
        await self._check(self.client.append(message, mailbox=quoted(mailbox), flags=flags), "APPEND")

    async def store_seen(self, uids: list[int]) -> None:
        if uids:
            await self._check(self.client.uid("store", _set(uids), "+FLAGS.SILENT (\\Seen)"), "STORE")

    async def move(self, uids: list[int], mailbox: str) -> None:
        if uids and self.move_capable:
            await self._check(self.client.uid("move", _set(uids), quoted(mailbox)), "MOVE")

    async def noop(self) -> None:
        await self._check(self.client.noop(), "NOOP")

    async def idle(self, seconds: float, stop: asyncio.Event) -> None:
        """Wait in IDLE until the server says something, ``seconds`` pass, or ``stop`` is set."""
        client = self.client
        try:
            idle = await asyncio.wait_for(client.idle_start(timeout=seconds), TIMEOUT)
        except Exception as exc:
            raise ImapError(f"IDLE: {type(exc).__name__}: {exc}") from None
        push = asyncio.ensure_future(client.wait_server_push(seconds + 1))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({push, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (push, stopped):
                task.cancel()
            await asyncio.gather(push, stopped, return_exceptions=True)
            if client.has_pending_idle():
                client.idle_done()
        await self._check(idle, "IDLE")


def _set(uids: list[int]) -> str:
    return ",".join(str(u) for u in uids)


def _text(lines: list[Any]) -> str:
    return " ".join(bytes(x).decode(errors="replace") for x in lines if isinstance(x, bytes | bytearray))[
        :300
    ]
