"""A plain HTTP file server on 127.0.0.1 for the tests of files fetched by URL (the API's
``image_url``, the relay's ``media_urls``): it serves what a test puts in ``files``, answers
``/moved`` with a redirect to ``/shot.png``, and records every path asked for."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar


class FileHandler(http.server.BaseHTTPRequestHandler):
    files: ClassVar[dict[str, bytes]] = {}
    requests: ClassVar[list[str]] = []

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
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def file_server() -> Iterator[tuple[str, type[FileHandler]]]:
    """The server's base URL and its handler class (``files`` to serve, ``requests`` seen)."""

    class Handler(FileHandler):
        files: ClassVar[dict[str, bytes]] = {}
        requests: ClassVar[list[str]] = []

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", Handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
