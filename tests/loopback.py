"""A real HTTP peer on 127.0.0.1 for tests that stand in for a service we cannot run here."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, str, bytes, dict[str, str]]  # status, content type, body, extra headers


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError):
            return  # the client went away (a request the caller cancelled): not the peer's error
        super().handle_error(request, client_address)


class LoopbackServer:
    """Serves POSTs on a free loopback port from a thread; ``answer(path, body)`` makes each reply."""

    def __init__(self, answer: Callable[[str, bytes, dict[str, str]], Reply]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, content_type, payload, headers = answer(self.path, body, dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a test's peer stays quiet

        self._server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        # ``shutdown`` returns once the serving loop next looks up, every ``poll_interval`` (0.5 s by
        # default): the peer's requests are answered at once either way; only its closing waited.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
