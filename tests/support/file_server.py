"""A plain HTTP file server on 127.0.0.1 for the tests of files fetched by URL (the API's
``image_url``, the relay's ``media_urls``): it serves what a test puts in ``files``, answers
``/moved`` with a redirect to ``/shot.png``, and records every path asked for. A path in
``stall`` is answered with its headers and half its body, then nothing until ``release`` is
set (a download a test can kill the gateway in the middle of)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

STALL_SECONDS = 120.0
"""The longest a stalled answer waits for ``release`` (a test that fails never hangs for ever)."""


class FileHandler(http.server.BaseHTTPRequestHandler):
    files: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[str]] = []
    stall: ClassVar[set[str]] = set()
    release: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        self.requests.append(self.path)
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/shot.png")
            self.end_headers()
            return
        data = self.files.get(self.path)
        if data is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.path in self.stall and not self.release.is_set():
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.release.wait(STALL_SECONDS)
            return
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def file_server() -> Iterator[tuple[str, type[FileHandler]]]:
    """The server's base URL and its handler class (``files`` to serve, ``requests`` seen)."""

    class Handler(FileHandler):
        files: ClassVar[dict[str, bytes]] = {}
        requests: ClassVar[list[str]] = []
        stall: ClassVar[set[str]] = set()
        release: ClassVar[threading.Event] = threading.Event()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Handler
    finally:
        Handler.release.set()
        server.shutdown()
        server.server_close()
        thread.join()
