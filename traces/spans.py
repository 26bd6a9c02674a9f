"""One helper per kind of span or event this project records; names from ``traces.attributes``.

    research (the query) ─┬─ plan
                          ├─ subagent <source>   one per task; decisions are its events
                          │    └─ MCP send tools/call <tool>   (the mcp SDK's client span, per attempt)
                          │         └─ tools/call <tool>       (the source's server span, in its process)
                          └─ synthesize

A standalone command (`research task`, `research sources call`) opens one root span of its own,
``command_span``, so its MCP requests (the session's handshake, ``tools/list``, each ``tools/call``) are
one trace, not one trace per request. Every root span says what it was: ``research.kind`` is
``query``, ``task`` or ``call``, and ``research.query`` (a query) or ``research.label`` what it was about.

Decisions are **events** on the subagent span rather than child spans: a decision has no duration,
it happens between attempts, and Jaeger shows a span's events as a timeline (its "Logs"), so the
retries read in order beside the attempt spans they separate.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from traces import attributes as names
from traces.redact import for_trace
from traces.setup import tracer

__all__ = [
    "command_span",
    "end_command",
    "end_research",
    "end_subagent",
    "plan_span",
    "record_decision",
    "record_model_use",
    "record_plan",
    "record_synthesis",
    "research_span",
    "subagent_span",
    "synthesize_span",
    "trace_id_of",
]


COMMAND_KINDS = ("query", "task", "call")


def trace_id_of(span: Span) -> str:
    return format(span.get_span_context().trace_id, "032x")


def research_span(query: str) -> AbstractContextManager[Span]:
    attributes = {names.KIND: "query", names.QUERY: str(for_trace(query))}
    return tracer().start_as_current_span("research", attributes=attributes)


def command_span(kind: str, label: str) -> AbstractContextManager[Span]:
    """The root span of one standalone command: ``kind`` task or call, ``label`` e.g. ``orders.get_order``.

    Every MCP request made inside it (the SDK's client spans, and through their ``traceparent`` the
    sources' server spans) is its descendant: the command is one trace.
    """
    if kind not in COMMAND_KINDS:
        raise ValueError(f"a command's kind is one of {', '.join(COMMAND_KINDS)}, not {kind!r}")
    attributes = {names.KIND: kind, names.LABEL: str(for_trace(label))}
    return tracer().start_as_current_span(f"research {kind}", attributes=attributes)


def end_command(span: Span, *, status: str) -> None:
    """What the command came to: the task's state, or ok / error for a call."""
    span.set_attribute(names.STATUS, status)


def end_research(span: Span, *, status: str, plan_size: int, findings: int, gaps: int) -> None:
    span.set_attributes(
        {names.STATUS: status, names.PLAN_SIZE: plan_size, names.FINDINGS: findings, names.GAPS: gaps}
    )


def plan_span() -> AbstractContextManager[Span]:
    return tracer().start_as_current_span("plan")


def record_plan(span: Span, task_ids: Sequence[str], *, round_number: int = 1) -> None:
    """A round's plan: the tasks it planned (the first round, every task; a later one, those it added)."""
    span.set_attributes(
        {names.PLAN_SIZE: len(task_ids), names.PLAN_TASKS: list(task_ids), names.PLAN_ROUND: round_number}
    )


def subagent_span(
    task_id: str, source: str, tool: str, arguments: Mapping[str, Any], *, follows: str = ""
) -> AbstractContextManager[Span]:
    """A subagent's span; ``follows``: the finding a later round's task follows ("orders:ORD-10074")."""
    attributes = {
        names.GEN_AI_OPERATION_NAME: names.INVOKE_AGENT,
        names.GEN_AI_AGENT_NAME: f"{source} subagent",
        names.TASK_ID: task_id,
        names.SOURCE: source,
        names.TOOL: tool,
        names.ARGUMENTS: json.dumps(for_trace(dict(arguments)), default=str, ensure_ascii=False),
        **({names.TASK_FOLLOWS: follows} if follows else {}),
    }
    # The subagent sets its own status: a recovered task is not a failed operation.
    return tracer().start_as_current_span(
        f"subagent {source}", attributes=attributes, record_exception=False, set_status_on_exception=False
    )


def record_decision(
    span: Span,
    *,
    action: str,
    category: str | None,
    attempt: int,
    backoff_ms: int,
    reason: str,
    error_type: str = "",
) -> None:
    event: dict[str, Any] = {
        names.RECOVERY_ACTION: action,
        names.RECOVERY_ATTEMPT: attempt,
        names.RECOVERY_BACKOFF_MS: backoff_ms,
        names.RECOVERY_REASON: str(for_trace(reason)),
        names.RECOVERY_RETRYABLE: category == "transient",
    }
    if category:
        event[names.RECOVERY_CATEGORY] = category
    if error_type:
        event[names.ERROR_TYPE] = error_type
    span.add_event(names.RECOVERY_DECISION, event)


def end_subagent(
    span: Span,
    *,
    state: str,
    attempts: int,
    category: str | None,
    message: str = "",
) -> None:
    span.set_attributes({names.TASK_STATE: state, names.TASK_ATTEMPTS: attempts})
    if state in ("ok", "empty"):
        span.set_status(Status(StatusCode.OK))
        return
    span.set_attribute(names.ERROR_TYPE, category or state)
    span.set_status(Status(StatusCode.ERROR, str(for_trace(message))[:300]))


def record_model_use(span: Span, *, input_tokens: int, output_tokens: int) -> None:
    """The tokens a model used driving a subagent (Claude mode)."""
    if input_tokens or output_tokens:
        span.set_attributes(
            {names.GEN_AI_INPUT_TOKENS: input_tokens, names.GEN_AI_OUTPUT_TOKENS: output_tokens}
        )


def synthesize_span() -> AbstractContextManager[Span]:
    return tracer().start_as_current_span("synthesize")


def record_synthesis(span: Span, *, findings: int, gaps: int) -> None:
    span.set_attributes({names.FINDINGS: findings, names.GAPS: gaps})
