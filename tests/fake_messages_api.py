"""A scripted Messages API on 127.0.0.1 for tests: real HTTP, for the real anthropic SDK's base_url.

Each POST /v1/messages takes the next scripted reply: a status code with a JSON body and headers.
The requests it received are kept, so a test can read what the SDK sent (the repair message, say).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.loopback import LoopbackServer


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
        self._server = LoopbackServer(self._answer)
        self.base_url = self._server.url

    def _answer(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, str, bytes, dict[str, str]]:
        self.requests.append(json.loads(body or b"{}"))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return reply.status, "application/json", json.dumps(reply.body).encode(), reply.headers

    def close(self) -> None:
        self._server.close()
