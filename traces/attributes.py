"""Every attribute and event name this project records, in one place.

| name                     | on                      | meaning                                                     |
|--------------------------|-------------------------|-------------------------------------------------------------|
| `recovery.decision`      | event on `subagent` span | one decision of the recovery policy                        |
| `recovery.action`        | decision event          | retry, repair, elevate, escalate, accept_empty, give_up, breaker_open, hook_blocked, outcome_unknown, approved, not_approved; in Claude mode also to_model, refused, fallback, stop_model |
| `recovery.category`      | decision event          | transient, validation, business, permission (absent for accept_empty) |
| `recovery.retryable`     | decision event          | whether the failure was retryable (transient)               |
| `recovery.attempt`       | decision event          | the call the decision followed (1-based)                    |
| `recovery.backoff_ms`    | decision event          | the back-off before the next call, for a retry              |
| `recovery.reason`        | decision event          | why, in words (redacted unless full payloads are on)        |
| `error.type`             | decision event, spans   | the outcome's short type: tool_error, timeout, connection_closed, ... |
| `gen_ai.operation.name`  | `subagent` span         | `invoke_agent` (GenAI semantic conventions)                 |
| `gen_ai.agent.name`      | `subagent` span         | `<source> subagent`                                         |
| `research.kind`          | root span of a command  | query (`research`), task (`research task`), call (`research call`) |
| `research.label`         | `research task`, `research call` | what the command did: `<source>.<tool>`           |
| `research.query`         | `research` span         | the question (redacted unless full payloads are on)         |
| `research.plan.size`     | `research`, `plan`      | how many tasks were planned                                 |
| `research.plan.tasks`    | `plan` span             | the task ids, in order                                      |
| `research.status`        | root span of a command  | complete or partial (a query); the task's state (a task); ok or error (a call) |
| `research.task.id`       | `subagent` span         | the planned task                                            |
| `research.task.state`    | `subagent` span         | ok, empty, escalated, blocked, deadline                     |
| `research.task.attempts` | `subagent` span         | calls made to the source                                    |
| `research.source`, `research.tool` | `subagent` span | which source and tool                                      |
| `research.arguments`     | `subagent` span         | the task's arguments, as JSON (redacted unless full payloads are on) |
| `research.findings`, `research.gaps` | `research`, `synthesize` | counts                                          |
| `research.run_id`        | resource                | the run this process belongs to                             |
| `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens` | `subagent` span | tokens a model used in Claude mode |
"""

from __future__ import annotations

RECOVERY_DECISION = "recovery.decision"
RECOVERY_ACTION = "recovery.action"
RECOVERY_CATEGORY = "recovery.category"
RECOVERY_RETRYABLE = "recovery.retryable"
RECOVERY_ATTEMPT = "recovery.attempt"
RECOVERY_BACKOFF_MS = "recovery.backoff_ms"
RECOVERY_REASON = "recovery.reason"
ERROR_TYPE = "error.type"

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INVOKE_AGENT = "invoke_agent"

KIND = "research.kind"
LABEL = "research.label"
QUERY = "research.query"
PLAN_SIZE = "research.plan.size"
PLAN_TASKS = "research.plan.tasks"
PLAN_ROUND = "research.plan.round"  # 1 for the first plan; a later round's plan adds follow-up tasks
TASK_FOLLOWS = "research.task.follows"  # the finding a follow-up task follows, "task:record"
STATUS = "research.status"
TASK_ID = "research.task.id"
TASK_STATE = "research.task.state"
TASK_ATTEMPTS = "research.task.attempts"
SOURCE = "research.source"
TOOL = "research.tool"
ARGUMENTS = "research.arguments"
FINDINGS = "research.findings"
GAPS = "research.gaps"
RUN_ID = "research.run_id"

SERVICE_NAME = "service.name"
SERVICE_VERSION = "service.version"
