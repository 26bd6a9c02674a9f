"""A scripted Messages API on 127.0.0.1 for tests: real HTTP, for the real anthropic SDK's base_url.

Each POST /v1/messages takes the next scripted reply: a status code with a JSON body and headers.
The requests it received are kept, so a test can read what the SDK sent (the repair message, say).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def tool_use(plan: dict[str, Any], *, input_tokens: int = 120, output_tokens: int = 80) -> Reply:
    return Reply(200, {
        "id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": "toolu_test", "name": "submit_plan", "input": plan}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })  # fmt: skip


def error(status: int, kind: str, message: str) -> Reply:
    # retry-after-ms keeps the SDK's own back-off (its one retry layer) short in tests.
    return Reply(
        status, {"type": "error", "error": {"type": kind, "message": message}}, {"retry-after-ms": "1"}
    )


class FakeMessagesApi:
    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                api.requests.append(json.loads(body or b"{}"))
                reply = api.replies.pop(0) if len(api.replies) > 1 else api.replies[0]
                payload = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
