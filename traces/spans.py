"""One helper per kind of span or event this project records; names from ``traces.attributes``.

    research (the query) ─┬─ plan
                          ├─ subagent <source>   one per task; decisions are its events
                          │    └─ MCP send tools/call <tool>   (the mcp SDK's client span, per attempt)
                          │         └─ tools/call <tool>       (the source's server span, in its process)
                          └─ synthesize

Decisions are **events** on the subagent span rather than child spans: a decision has no duration,
it happens between attempts, and Jaeger shows a span's events as a timeline (its "Logs"), so the
retries read in order beside the attempt spans they separate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from traces import attributes as names
from traces.redact import for_trace
from traces.setup import tracer

__all__ = [
    "end_research",
    "end_subagent",
    "plan_span",
    "record_decision",
    "record_plan",
    "record_synthesis",
    "research_span",
    "subagent_span",
    "synthesize_span",
    "trace_id_of",
]


def trace_id_of(span: Span) -> str:
    return format(span.get_span_context().trace_id, "032x")


@contextmanager
def research_span(query: str) -> Iterator[Span]:
    with tracer().start_as_current_span("research", attributes={names.QUERY: str(for_trace(query))}) as span:
        yield span


def end_research(span: Span, *, status: str, plan_size: int, findings: int, gaps: int) -> None:
    span.set_attributes(
        {names.STATUS: status, names.PLAN_SIZE: plan_size, names.FINDINGS: findings, names.GAPS: gaps}
    )


@contextmanager
def plan_span() -> Iterator[Span]:
    with tracer().start_as_current_span("plan") as span:
        yield span


def record_plan(span: Span, task_ids: Sequence[str]) -> None:
    span.set_attributes({names.PLAN_SIZE: len(task_ids), names.PLAN_TASKS: list(task_ids)})


@contextmanager
def subagent_span(task_id: str, source: str, tool: str, arguments: Mapping[str, Any]) -> Iterator[Span]:
    attributes = {
        names.GEN_AI_OPERATION_NAME: names.INVOKE_AGENT,
        names.GEN_AI_AGENT_NAME: f"{source} subagent",
        names.TASK_ID: task_id,
        names.SOURCE: source,
        names.TOOL: tool,
        names.ARGUMENTS: json.dumps(for_trace(dict(arguments)), default=str, ensure_ascii=False),
    }
    # The subagent sets its own status: a recovered task is not a failed operation.
    with tracer().start_as_current_span(
        f"subagent {source}", attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        yield span


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
    input_tokens: int = 0,
    output_tokens: int = 0,
) -> None:
    span.set_attributes({names.TASK_STATE: state, names.TASK_ATTEMPTS: attempts})
    if input_tokens or output_tokens:  # a model drove this subagent (Claude mode)
        span.set_attributes(
            {names.GEN_AI_INPUT_TOKENS: input_tokens, names.GEN_AI_OUTPUT_TOKENS: output_tokens}
        )
    if state in ("ok", "empty"):
        span.set_status(Status(StatusCode.OK))
        return
    span.set_attribute(names.ERROR_TYPE, category or state)
    span.set_status(Status(StatusCode.ERROR, str(for_trace(message))[:300]))


@contextmanager
def synthesize_span() -> Iterator[Span]:
    with tracer().start_as_current_span("synthesize") as span:
        yield span


def record_synthesis(span: Span, *, findings: int, gaps: int) -> None:
    span.set_attributes({names.FINDINGS: findings, names.GAPS: gaps})
