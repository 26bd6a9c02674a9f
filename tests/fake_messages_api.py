"""A scripted Messages API on 127.0.0.1 for tests: real HTTP, for the real anthropic SDK's base_url.

Each POST /v1/messages is answered by a responder: a list of scripted replies taken in order, or a
``Conversations`` that routes each request to the lead agent's, the brief writer's or one
subagent's script (subagents run concurrently, so one shared list would race). The requests it
received are kept, so a test can read what the SDK sent (a repair message, a tool result).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from coordinator.planning.plan import Plan, Ref
from coordinator.planning.planner import plan_query
from tests.loopback import LoopbackServer

Responder = Callable[[dict[str, Any]], "Reply"]


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _message(content: list[dict[str, Any]], stop_reason: str, input_tokens: int, output_tokens: int) -> Reply:
    return Reply(200, {
        "id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test",
        "content": content, "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })  # fmt: skip


def tool_use(
    plan: dict[str, Any], *, name: str = "submit_plan", input_tokens: int = 120, output_tokens: int = 80
) -> Reply:
    """A forced structured answer: the lead agent's plan (or, with ``name``, the brief)."""
    block = {"type": "tool_use", "id": "toolu_test", "name": name, "input": plan}
    return _message([block], "tool_use", input_tokens, output_tokens)


def calls(*requested: tuple[str, dict[str, Any]], input_tokens: int = 300, output_tokens: int = 40) -> Reply:
    """A subagent's model asking for MCP tool calls."""
    blocks = [
        {"type": "tool_use", "id": f"toolu_{index}", "name": name, "input": arguments}
        for index, (name, arguments) in enumerate(requested)
    ]
    return _message(blocks, "tool_use", input_tokens, output_tokens)


def says(text: str, *, input_tokens: int = 400, output_tokens: int = 30) -> Reply:
    """A model ending its turn with text."""
    return _message([{"type": "text", "text": text}], "end_turn", input_tokens, output_tokens)


def error(status: int, kind: str, message: str) -> Reply:
    # retry-after-ms keeps the SDK's own back-off (its one retry layer) short in tests.
    return Reply(
        status, {"type": "error", "error": {"type": kind, "message": message}}, {"retry-after-ms": "1"}
    )


def plan_as_input(plan: Plan, rename: Callable[[str], str] = str) -> dict[str, Any]:
    """A plan as the lead agent submits it (references as "{task.field}"; ``rename`` renames tasks)."""
    return {"tasks": [
        {"id": rename(task.id), "source": task.source, "tool": task.tool, "purpose": task.purpose,
         "depends_on": [rename(upstream) for upstream in task.depends_on],
         "arguments": {name: f"{{{rename(value.task)}.{value.field}}}" if isinstance(value, Ref) else value
                       for name, value in task.arguments.items()}}
        for task in plan.order()
    ], "unplanned": [{"what": item.what, "why": item.why, "next_step": item.next_step} for item in plan.unplanned]}  # fmt: skip


def last_tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results the SDK sent in this request's last user turn."""
    content = request["messages"][-1]["content"]
    return [block for block in content if isinstance(block, dict) and block.get("type") == "tool_result"]


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def planned_call(request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The planned call a subagent's first message names."""
    planned = json.loads(text_of(request["messages"][0]).removeprefix("Planned call: "))
    return planned["tool"], planned["arguments"]


def obedient_subagent(request: dict[str, Any]) -> Reply:
    """A model that makes the planned call once, then ends its turn whatever came back."""
    if len(request["messages"]) == 1:
        return calls(planned_call(request))
    return says("Done; the results are above.")


def reckless_subagent(request: dict[str, Any]) -> Reply:
    """A model that ignores what it is told: it repeats its call whatever came back, and wherever it
    can, tries a £900 refund; then it ends its turn. The code's guarantees must hold all the same."""
    turn = len(request["messages"]) // 2 + 1
    if turn == 1:
        return calls(planned_call(request))
    if turn == 2:
        requested = [planned_call(request)]
        if any(tool["name"] == "issue_refund" for tool in request.get("tools", [])):
            requested.append(
                ("issue_refund", {"order_id": "ORD-10023", "amount": 900, "idempotency_key": "reckless"})
            )
        return calls(*requested)
    return says("Done.")


def obedient_planner(request: dict[str, Any]) -> Reply:
    return tool_use(plan_as_input(plan_query(request["messages"][0]["content"])))


def content_lead(request: dict[str, Any]) -> Reply:
    """A lead agent that reads a round's findings and adds nothing: the first plan was enough."""
    return tool_use({"tasks": [], "done": "the findings answer the query"}, name="add_tasks")


def citing_writer(request: dict[str, Any]) -> Reply:
    """A brief writer that makes one claim per finding it was given, citing it."""
    prompt = request["messages"][0]["content"]
    cited = re.findall(r"^\[([^\]]+)\] (.+)$", prompt, flags=re.MULTILINE)
    claims = [{"text": text[:200], "citations": [citation]} for citation, text in cited[:10]]
    return tool_use({"claims": claims}, name="submit_brief")


class Silent:
    """A model API that accepts a request and does not answer until released (end of the test)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.released.wait(timeout=60)
        return says("Too late.")


class Conversations:
    """Routes each request: the planner, the lead's later rounds, the brief writer, or the subagent
    named in the system prompt.

    Each route takes its scripted replies in order and then its default responder (an obedient
    model unless told otherwise).
    """

    def __init__(
        self,
        *,
        planner: list[Reply] | None = None,
        lead: list[Reply] | None = None,
        writer: list[Reply] | None = None,
        subagents: dict[str, list[Reply]] | None = None,
        default_subagent: Responder = obedient_subagent,
    ) -> None:
        self.scripts: dict[str, list[Reply]] = {
            "planner": list(planner or []), "lead": list(lead or []), "writer": list(writer or []),
            **{task: list(replies) for task, replies in (subagents or {}).items()},
        }  # fmt: skip
        self.defaults: dict[str, Responder] = {
            "planner": obedient_planner, "lead": content_lead, "writer": citing_writer,
        }  # fmt: skip
        self.default_subagent = default_subagent

    def __call__(self, request: dict[str, Any]) -> Reply:
        route = self.route(request)
        script = self.scripts.get(route)
        if script:
            return script.pop(0)
        return self.defaults.get(route, self.default_subagent)(request)

    @staticmethod
    def route(request: dict[str, Any]) -> str:
        chosen = (request.get("tool_choice") or {}).get("name")
        if chosen == "submit_plan":
            return "planner"
        if chosen == "add_tasks":
            return "lead"
        if chosen == "submit_brief":
            return "writer"
        system = request.get("system") or ""
        match = re.search(r"Task id: ([a-z_][a-z0-9_]*)\.", system if isinstance(system, str) else "")
        return match[1] if match else "unknown"


class FakeMessagesApi:
    def __init__(self, replies: list[Reply] | Responder) -> None:
        if callable(replies):
            self.respond: Responder = replies
        else:
            scripted = list(replies)
            self.respond = lambda request: scripted.pop(0) if len(scripted) > 1 else scripted[0]
        self.requests: list[dict[str, Any]] = []
        self.script_errors: list[str] = []
        self._server = LoopbackServer(self._answer)
        self.base_url = self._server.url

    def _answer(
        self, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, str, bytes, dict[str, str]]:
        request = json.loads(body or b"{}")
        self.requests.append(request)
        try:
            reply = self.respond(request)
        except Exception as exc:  # a broken script must fail its test, not look like a network fault
            self.script_errors.append(repr(exc))
            reply = error(400, "invalid_request_error", f"the fake's script failed: {exc!r}")
        return reply.status, "application/json", json.dumps(reply.body).encode(), reply.headers

    def requests_of(self, route: str) -> list[dict[str, Any]]:
        return [request for request in self.requests if Conversations.route(request) == route]

    def close(self) -> None:
        self._server.close()
