"""A subagent driven by Claude (Claude mode): the model chooses the calls, the code keeps every bound.

The model gets its one source's MCP tools through the anthropic SDK's own helpers
(``async_mcp_tool`` and the tool runner). Those helpers call whatever object they are given through
``call_tool``; here that object is ``ModelCaller``, so each call the model asks for goes through the
subagent's ``settle`` before anything comes back:

    model ─tool_use─► ModelCaller.call_tool ─► settle: pre-call hooks ► breaker ► source ► classify
      ▲                                              ► post-call hooks (trimmed) ► transient retried here
      │                                              ► permission elevated here when the broker grants
      └──── tool_result (the contract's JSON) ◄── results, and the errors the model must act on:
                                                  validation (its repair counts against the repair
                                                  budget), business, permission refused, blocked

What the code guarantees whatever the model asks: a hook blocks what it blocks; a transient fault
is retried with back-off before the model sees it and never past the retry bound; a call identical
to one that failed for good is not sent again; the model's calls stop at the policy's call budget,
its turns at ``max_turns``, its tokens at the query's budget, its time at the deadline. The report
is the same ``SubagentReport`` as in deterministic mode: the task's state is the outcome of its
planned tool; an error the model left unresolved after it escalates the task; when the model ends
without making the planned call (or cannot be reached), the code makes it itself.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from sources.contract import ErrorCategory, ResultPage, ToolError, to_call_tool_result
from subagents.classify import Outcome
from subagents.claude import ClaudeSettings, TokenBudget, model_api_category
from subagents.policy import Recovery
from subagents.subagent import (
    ACCEPT_EMPTY,
    Run,
    Settled,
    SubagentReport,
    add_new,
    describe_changes,
    recover,
    settle,
)

if TYPE_CHECKING:
    import anthropic
    from anthropic.types.beta import BetaMessageParam
    from mcp.types import CallToolResult

__all__ = ["ClaudeSubagents", "ModelCaller", "claude_subagents"]

# The tool runner answers a call of a tool it was not given with an error result, and warns on stderr;
# a subagent records a `refused` decision for it instead (see _refuse_unknown_tools).
warnings.filterwarnings("ignore", message=r"Tool '.*' not found in tool runner", category=UserWarning)

_SYSTEM = """You are the {source} subagent of a research coordinator. Task id: {task}.
Your task (purpose: {purpose}): make the planned call below with the tools of the {source} source, then
say in one or two sentences what you found. Tools answer with JSON: results (resultCount 0 means the
query ran and found nothing), or an error with errorCategory, isRetryable and a description.
Transient faults have already been retried for you. On a validation error, correct the argument the
description names and call again. Business and permission errors are not fixed by calling again: do
not repeat the call; end your turn and say what happened. Call only what the task needs."""


def _stopped_error(report: SubagentReport) -> ToolError:
    """What the model is told once the code has stopped its subagent (the report is escalated)."""
    category = report.escalation.error_category if report.escalation else ErrorCategory.TRANSIENT
    return ToolError.of(category, f"This subagent has stopped: {report.message}")


def _call_key(tool: str, arguments: dict[str, Any]) -> str:
    return json.dumps([tool, arguments], sort_keys=True, default=str)


@dataclass
class ModelCaller:
    """What the model's MCP tools call: the subagent's own recovery between the model and its source."""

    run: Run
    runner: Any = None  # the SDK's tool runner this caller serves; closed when the code ends the loop
    stopped: SubagentReport | None = None  # the code ended the subagent (deadline, breaker, repairs)
    planned: tuple[dict[str, Any], Outcome] | None = None  # the last call of the task's tool, and its outcome
    found: list[Any] = field(default_factory=list)  # every record the task's tool returned (pages add up)
    last: Outcome | None = None  # the outcome of the model's last call, whatever its tool
    failed_for_good: dict[str, ToolError] = field(default_factory=dict)  # by identical call
    repairing: str | None = None  # the tool whose validation error the model was given to repair
    ended_loop: bool = False  # the code ended the model's loop (its decision says why)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **_: Any) -> CallToolResult:
        """The signature ``async_mcp_tool`` calls; never raises, every outcome is a contract result."""
        return to_call_tool_result(await self._answer(name, dict(arguments or {})))

    async def _end_loop(self) -> None:
        """The runner stops after this turn's calls: the model is asked nothing more."""
        self.ended_loop = True
        if self.runner is not None:
            await self.runner.close()

    async def _answer(self, tool: str, arguments: dict[str, Any]) -> ResultPage[Any] | ToolError | Any:
        run, policy = self.run, self.run.runtime.policy
        if self.stopped is not None:
            return _stopped_error(self.stopped)
        key = _call_key(tool, arguments)
        if key in self.failed_for_good:
            error = self.failed_for_good[key]
            reason = f"not sent again: the identical call failed with a {error.error_category} error"
            run.decide("refused", f"{reason}: {error.description}", error.error_category)
            return error
        if run.attempts >= policy.max_attempts:  # the same bound a subagent has in the deterministic mode
            error = ToolError.of(
                ErrorCategory.BUSINESS, f"Not called: the subagent's {policy.max_attempts} calls are spent."
            )
            run.decide("refused", error.description, ErrorCategory.BUSINESS)
            await self._end_loop()
            return error
        if self.repairing is not None:
            if tool == self.repairing:  # the model's answer to a validation error: a repair
                run.repairs += 1
                reason = f"repair {run.repairs}/{policy.max_repairs} by the model: {describe_changes(run.arguments, arguments)}"
                run.decide("repair", reason, ErrorCategory.VALIDATION)
            self.repairing = None
        run.tool, run.arguments = tool, arguments
        settled = await settle(run)
        if isinstance(settled, SubagentReport):  # the code had to stop: deadline, open breaker, retries spent
            self.stopped = settled
            await self._end_loop()
            return _stopped_error(settled)
        return await self._hand_over(key, settled)

    async def _hand_over(self, key: str, settled: Settled) -> ResultPage[Any] | ToolError | Any:
        """Record what settled, decide what the model may do next, and return what it sees."""
        run, policy = self.run, self.run.runtime.policy
        outcome, error = settled.outcome, settled.outcome.error
        self.last = outcome
        page = outcome.result if isinstance(outcome.result, ResultPage) else None
        if run.tool == run.task.tool:
            self.planned = (dict(run.arguments), outcome)
            add_new(self.found, page.results if page else [])
        elif page is not None:
            add_new(run.other_results.setdefault(run.tool, []), page.results)
        if error is None:
            if outcome.kind == "empty":
                run.decide("accept_empty", ACCEPT_EMPTY)
            return outcome.result
        if outcome.error_type == "hook_blocked":
            run.step("hook_blocked", f"{settled.reason} Returned to the model.", outcome)
        elif policy.action_for(error.error_category) is Recovery.REPAIR:
            if run.repairs >= policy.max_repairs:
                self.stopped = run.stop(
                    "escalate", f"{run.repairs} repairs spent: {error.description}", outcome
                )
                await self._end_loop()
                return error
            self.repairing = run.tool
            used = f"{run.repairs}/{policy.max_repairs} repairs used"
            run.step("to_model", f"returned to the model to repair ({used}): {error.description}", outcome)
        else:
            run.step("to_model", f"returned to the model, not retried: {settled.reason}", outcome)
        if not error.is_retryable:
            self.failed_for_good[key] = error
        return error

    def final_report(self) -> SubagentReport | None:
        """The subagent's report from what the model did; None when the planned call was never made.

        An error left after the model's last call, or on the task's own tool, escalates the task.
        """
        run = self.run
        if self.stopped is not None:
            return self._keeping_found(self.stopped)
        planned = self.planned[1] if self.planned is not None else None
        unresolved = next((o for o in (self.last, planned) if o is not None and o.error is not None), None)
        if unresolved is not None and unresolved.error is not None:
            reason = f"the model ended with this unresolved: {unresolved.error.description}"
            return self._keeping_found(run.stop("escalate", reason, unresolved))
        if self.planned is None:
            return None
        run.tool, run.arguments = run.task.tool, self.planned[0]
        report = run.report(self.planned[1])
        if self.found:  # every page the model read, not only its last one
            report = report.model_copy(update={"state": "ok", "results": self.found, "message": None})
        return report

    def _keeping_found(self, report: SubagentReport) -> SubagentReport:
        """An escalated report keeps, in its partial results, what the task's tool had already found."""
        escalation = report.escalation
        if escalation is None or not self.found:
            return report
        kept = list(escalation.partial_results)
        add_new(kept, self.found)
        return report.model_copy(
            update={"escalation": escalation.model_copy(update={"partial_results": kept})}
        )


@dataclass
class ClaudeSubagents:
    """The ``ModelDriver`` of Claude mode: one tool loop per subagent, sharing the query's client and budget."""

    settings: ClaudeSettings
    client: anthropic.AsyncAnthropic
    budget: TokenBudget
    # A source's tools, listed once per session (a respawned source is listed again).
    _listed: dict[tuple[str, int], list[Any]] = field(default_factory=dict)

    async def drive(self, run: Run) -> SubagentReport:
        if self.budget.exhausted:
            return await _code_takes_over(
                run, f"the query's token budget is spent ({self.budget.describe()})"
            )
        try:
            tools = await self._tools(run)
        except Exception as exc:  # a boundary: the code's own recovery deals with a source it cannot list
            return await _code_takes_over(
                run,
                f"{run.task.source}'s tools could not be listed ({type(exc).__name__})",
                ErrorCategory.TRANSIENT,
            )
        caller = ModelCaller(run)
        await self._loop(run, caller, tools)
        report = caller.final_report()
        if report is not None:
            return report
        return await _code_takes_over(run, f"the model ended without calling {run.task.tool}")

    async def _tools(self, run: Run) -> list[Any]:
        connection = run.runtime.connections[run.task.source]
        client, generation = await connection.session()  # opening is bounded by the connection itself
        key = (run.task.source, generation)
        if key not in self._listed:
            timeout_s = min(
                run.runtime.policy.call_timeout_s, max(run.deadline - run.runtime.clock.now(), 0.0)
            )
            with anyio.fail_after(timeout_s):
                self._listed[key] = (await client.list_tools()).tools
        return self._listed[key]

    async def _loop(self, run: Run, caller: ModelCaller, tools: list[Any]) -> None:
        # Here, not at the top: start-up time (the SDK takes seconds to import; only Claude mode needs it).
        import anthropic
        from anthropic.lib.tools.mcp import async_mcp_tool

        task = run.task
        planned = json.dumps({"tool": task.tool, "arguments": task.arguments}, default=str)
        first: BetaMessageParam = {"role": "user", "content": f"Planned call: {planned}"}
        # async_mcp_tool is typed for an mcp ClientSession; it only calls ``call_tool``, which ModelCaller has.
        runnable = [async_mcp_tool(tool, caller) for tool in tools]  # type: ignore[arg-type]
        runner = self.client.beta.messages.tool_runner(
            model=self.settings.model,
            max_tokens=self.settings.max_tokens,
            max_iterations=self.settings.max_turns,  # the runner runs the last turn's calls, then stops
            system=_SYSTEM.format(source=task.source, task=task.id, purpose=task.purpose),
            messages=[first],
            tools=runnable,
            # Every turn sends the whole conversation: it stays in this process (where the hooks and the
            # trace see it) and nothing depends on state a server holds between turns.
            thread=False,
        )
        caller.runner = runner
        known = {tool.name for tool in tools}
        clock = run.runtime.clock
        stop, wants_more = "", False
        try:
            with anyio.move_on_after(max(run.deadline - clock.now(), 0.0)) as deadline:
                async for message in runner:
                    run.turns += 1
                    input_tokens, output_tokens = self.budget.spend(message.usage)
                    run.input_tokens += input_tokens
                    run.output_tokens += output_tokens
                    wants_more = message.stop_reason == "tool_use"
                    _refuse_unknown_tools(run, message, known)
                    if wants_more and self.budget.exhausted:
                        stop = f"the query's token budget is spent ({self.budget.describe()}); its calls were not made"
                        break
                    if wants_more and clock.now() >= run.deadline:
                        stop = "the deadline came while the model was working"
                        break
            if deadline.cancelled_caught:
                stop = "the deadline came while the model was working"
            elif not stop and wants_more and not caller.ended_loop:  # the runner ended it at max_turns
                stop = f"the model used its {run.turns} turns"
            if stop:
                run.out_of_time = stop.startswith("the deadline")
                run.decide("stop_model", stop, ErrorCategory.TRANSIENT if run.out_of_time else None)
        except anthropic.AnthropicError as exc:
            reason = f"the model API failed: {type(exc).__name__}: {exc}"
            run.decide("stop_model", reason, model_api_category(exc))
        except Exception as exc:  # a boundary: whatever breaks in the loop, the code still carries the task
            run.decide("stop_model", f"the model's tool loop failed: {type(exc).__name__}: {exc}")
        finally:
            await runner.close()


def _refuse_unknown_tools(run: Run, message: Any, known: set[str]) -> None:
    """A tool the source does not have never runs (the SDK answers the model itself); say so here."""
    for block in message.content:
        if block.type == "tool_use" and block.name not in known:
            reason = f"the model asked for {block.name}, which {run.task.source} does not have; not called"
            run.decide("refused", reason, ErrorCategory.VALIDATION)


@contextlib.asynccontextmanager
async def claude_subagents(
    settings: ClaudeSettings | None, budget: TokenBudget | None = None
) -> AsyncIterator[ClaudeSubagents | None]:
    """Claude mode's driver with its client open; None for the deterministic mode, or when there is no key."""
    if settings is None or not settings.api_key:
        yield None
        return
    async with settings.client() as client:
        yield ClaudeSubagents(settings, client, budget or TokenBudget(settings.token_budget))


async def _code_takes_over(run: Run, why: str, category: ErrorCategory | None = None) -> SubagentReport:
    """The model cannot carry the task: the code makes the planned call, as in deterministic mode."""
    run.tool, run.arguments = run.task.tool, dict(run.task.arguments)
    run.decide("fallback", f"{why}; the code makes the planned call", category)
    return await recover(run)
