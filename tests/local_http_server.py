"""A tiny threaded HTTP server on 127.0.0.1 for offline download tests.

Each path answers an in-memory payload. A route can also answer an HTTP error
status, or announce a ``Content-Length`` larger than what it sends and then
close the connection, as a dropped transfer does::

    with LocalHTTPServer({"/a.tar.gz": payload}) as server:
        server.add("/missing", status=404)
        server.add("/cut", payload, announce_length=len(payload) * 2)
        url = server.url("/a.tar.gz")
        ...
    assert server.requests == ["/a.tar.gz"]

Paths without a route answer 404. ``requests`` lists the paths asked for, in
order (GET and HEAD), so a test can tell whether a cache was used.
"""

from __future__ import annotations

import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Mapping
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Route:
    """What one path answers."""

    body: bytes = b""
    status: int = 200
    content_type: str = "application/octet-stream"
    #: Announce this many bytes; if larger than ``body``, send ``body`` and then close.
    announce_length: int | None = None


class LocalHTTPServer:
    """Serve :class:`Route` payloads per path on ``127.0.0.1`` (a free port), in a thread."""

    def __init__(self, routes: Mapping[str, bytes | Route] | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        for path, route in (routes or {}).items():
            self.add(path, route)

    def add(
        self,
        path: str,
        body: bytes | Route = b"",
        *,
        status: int = 200,
        content_type: str = "application/octet-stream",
        announce_length: int | None = None,
    ) -> str:
        """Register what ``path`` answers; return its URL (once started) or the path."""
        route = body if isinstance(body, Route) else Route(body, status, content_type, announce_length)
        self.routes[path] = route
        return self.url(path) if self._server is not None else path

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not running")
        return self._server.server_address[1]

    def url(self, path: str = "/") -> str:
        """The full URL of ``path`` on this server."""
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> "LocalHTTPServer":
        if self._server is not None:
            return self
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - silence the log
                pass

            def _answer(self, send_body: bool) -> None:
                path = urlsplit(self.path).path
                with owner._lock:
                    owner.requests.append(path)
                route = owner.routes.get(path, Route(b"not found", status=404, content_type="text/plain"))
                length = route.announce_length if route.announce_length is not None else len(route.body)
                self.send_response(route.status)
                self.send_header("Content-Type", route.content_type)
                self.send_header("Content-Length", str(length))
                cut = length > len(route.body)
                if cut:
                    self.send_header("Connection", "close")
                self.end_headers()
                if send_body:
                    self.wfile.write(route.body)
                    self.wfile.flush()
                if cut:
                    # Drop the connection before the announced length arrived.
                    self.close_connection = True

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._answer(send_body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(send_body=False)

        server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (the port then refuses connections)."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> "LocalHTTPServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        # A client hanging up (as download tests make it do) is not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def unused_port_url(path: str = "/") -> str:
    """A URL on 127.0.0.1 whose port nothing listens on: connecting is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"
