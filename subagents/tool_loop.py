"""A subagent driven by Claude (Claude mode): the model chooses the calls, the code keeps every bound.

The model gets its one source's MCP tools through the anthropic SDK's own helpers
(``async_mcp_tool`` and the tool runner). Those helpers call whatever object they are given through
``call_tool``; here that object is ``ModelCaller``, so each call the model asks for goes through the
subagent's state machine (``Subagent.call``) before anything comes back:

    model ─tool_use─► ModelCaller.call_tool ─► Subagent.call: pre-call hooks ► breaker ► source ► classify
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

from sources.contract import ErrorCategory, ResultPage, ToolError
from sources.deferred import deferred
from subagents import recovery
from subagents.classify import Outcome
from subagents.claude import ClaudeSettings, TokenBudget, load_sdk, model_api_category
from subagents.model_use import ClaudeReport, ModelUse
from subagents.recovery import ModelStop, SubagentReport, add_new
from subagents.subagent import Subagent
from traces.spans import record_model_use

# The SDK takes seconds to import, and every run loads this module (deterministic ones too): only
# Claude mode loads the SDK.
if TYPE_CHECKING:
    import anthropic
    from anthropic.lib.tools import mcp as anthropic_mcp
    from anthropic.types.beta import BetaMessage, BetaMessageParam
    from mcp.types import CallToolResult
else:
    anthropic = deferred("anthropic")
    anthropic_mcp = deferred(
        "anthropic.lib.tools.mcp"
    )  # the SDK's MCP helpers, a module `anthropic` never imports

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


class _OwnCodeFailed(Exception):
    """Our own code failed under the SDK's tool runner, which would hand any exception to the model as
    an error result; it is carried out of the loop instead and re-raised there, never hidden."""


@dataclass
class ModelCaller:
    """What the model's MCP tools call: the subagent's own recovery between the model and its source.

    It feeds the model's calls to the same ``Subagent`` and the same machine (``subagents.recovery``)
    as the deterministic mode, which also keeps the calls that failed for good and the tool the model
    was asked to repair; what it keeps itself is what the model was given: every record returned.
    """

    agent: Subagent
    runner: Any = None  # the SDK's tool runner this caller serves; closed when the code ends the loop
    stopped: SubagentReport | None = None  # the code ended the subagent (deadline, breaker, repairs)
    planned: tuple[dict[str, Any], Outcome] | None = None  # the last call of the task's tool, and its outcome
    found: list[Any] = field(default_factory=list)  # every record the task's tool returned (pages add up)
    other_results: dict[str, list[Any]] = field(default_factory=dict)  # records of the source's other tools
    last: Outcome | None = None  # the outcome of the model's last call, whatever its tool
    ended_loop: bool = False  # the code ended the model's loop (its decision says why)
    model: ModelUse = field(default_factory=ModelUse)  # the model's turns and tokens so far
    crashed: BaseException | None = None  # our own code failed under the runner: re-raised after the loop

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, **_: Any) -> CallToolResult:
        """The signature ``async_mcp_tool`` calls; every outcome is a contract result."""
        try:
            answer = await self._answer(name, dict(arguments or {}))
        except Exception as exc:  # our own bug: kept for the loop to re-raise (see _OwnCodeFailed)
            self.crashed = exc
            await self._end_loop()
            raise _OwnCodeFailed from exc
        return self.agent.runtime.classifier.for_model(answer)

    async def _end_loop(self) -> None:
        """The runner stops after this turn's calls: the model is asked nothing more."""
        self.ended_loop = True
        await self.runner.close()  # set before the runner makes its first call

    async def _answer(self, tool: str, arguments: dict[str, Any]) -> ResultPage[Any] | ToolError | Any:
        """The machine's answer to the model's call: what settled, a refusal, or that the run ended."""
        if self.stopped is not None:
            return _stopped_error(self.stopped)
        step = await self.agent.call(tool, arguments)
        if isinstance(step, recovery.Ended):  # the code had to stop: deadline, open breaker, budgets spent
            self.stopped = recovery.report(self.agent.state, step.outcome)
            await self._end_loop()
            return _stopped_error(self.stopped)
        if step.outcome is not None:
            self._keep(step.outcome)
        if step.end_loop:
            await self._end_loop()
        return step.answer

    def _keep(self, outcome: Outcome) -> None:
        """Record what a call returned: the task's own tool's records, and the other tools' apart."""
        call = self.agent.state.call
        self.last = outcome
        page = outcome.result if isinstance(outcome.result, ResultPage) else None
        if call.tool == self.agent.task.tool:
            self.planned = (dict(call.arguments), outcome)
            add_new(self.found, page.results if page else [])
        elif page is not None:
            add_new(self.other_results.setdefault(call.tool, []), page.results)

    def final_report(self) -> SubagentReport | None:
        """The subagent's report from what the model did; None when the planned call was never made.

        An error left after the model's last call, or on the task's own tool, escalates the task.
        """
        agent = self.agent
        if self.stopped is not None:
            return self._keeping_found(self.stopped)
        planned = self.planned[1] if self.planned is not None else None
        unresolved = next((o for o in (self.last, planned) if o is not None and o.error is not None), None)
        if unresolved is not None and unresolved.error is not None:
            return self._keeping_found(agent.ended(recovery.Unresolved(unresolved)))
        if self.planned is None:
            return None
        arguments, outcome = self.planned
        report = recovery.report(agent.state.calling(agent.task.tool, arguments), outcome)
        if self.found:  # every page the model read, not only its last one
            report = report.model_copy(update={"state": "ok", "results": self.found, "message": None})
        return report

    def _keeping_found(self, report: SubagentReport) -> SubagentReport:
        """An escalated report keeps, in its partial results, what the task's tool had already found."""
        escalation = report.escalation
        if escalation is None or not self.found:
            return report
        kept = add_new(list(escalation.partial_results), self.found)
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

    async def drive(self, agent: Subagent) -> SubagentReport:
        caller = ModelCaller(agent)
        report = await self._drive(agent, caller)
        use = caller.model
        record_model_use(agent.span, input_tokens=use.input_tokens, output_tokens=use.output_tokens)
        return ClaudeReport(**dict(report), model=use, other_results=caller.other_results)

    async def _drive(self, agent: Subagent, caller: ModelCaller) -> SubagentReport:
        if self.budget.exhausted:
            return await _code_takes_over(
                agent, f"the query's token budget is spent ({self.budget.describe()})"
            )
        try:
            tools = await self._tools(agent)
        except Exception as exc:  # a boundary: the code's own recovery deals with a source it cannot list
            why = f"{agent.task.source}'s tools could not be listed ({type(exc).__name__})"
            return await _code_takes_over(agent, why, ErrorCategory.TRANSIENT)
        await self._loop(agent, caller, tools)
        report = caller.final_report()
        if report is not None:
            return report
        return await _code_takes_over(agent, f"the model ended without calling {agent.task.tool}")

    async def _tools(self, agent: Subagent) -> list[Any]:
        connection = agent.runtime.connections[agent.task.source]
        client, generation = await connection.session()  # opening is bounded by the connection itself
        key = (agent.task.source, generation)
        if key not in self._listed:
            left = max(agent.state.deadline - agent.runtime.clock.now(), 0.0)
            with anyio.fail_after(min(agent.runtime.policy.call_timeout_for(agent.task.source), left)):
                self._listed[key] = (await client.list_tools()).tools
        return self._listed[key]

    def _runner(self, agent: Subagent, caller: ModelCaller, tools: list[Any]) -> Any:
        """The SDK's tool runner over the source's tools, each answered through ``caller``."""
        task = agent.task
        planned = json.dumps({"tool": task.tool, "arguments": task.arguments}, default=str)
        first: BetaMessageParam = {"role": "user", "content": f"Planned call: {planned}"}
        # async_mcp_tool is typed for an mcp ClientSession; it only calls ``call_tool``, which ModelCaller has.
        runnable = [anthropic_mcp.async_mcp_tool(tool, caller) for tool in tools]  # type: ignore[arg-type]
        return self.client.beta.messages.tool_runner(
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

    async def _loop(self, agent: Subagent, caller: ModelCaller, tools: list[Any]) -> None:
        runner = caller.runner = self._runner(agent, caller, tools)
        try:
            stopped = await self._turns(agent, caller, runner, {tool.name for tool in tools})
            if stopped is not None:
                agent.feed(stopped)
        except anthropic.AnthropicError as exc:  # the model API failed: the code carries the task on
            reason = f"the model API failed: {type(exc).__name__}: {exc}"
            agent.feed(recovery.ModelStopped(ModelStop.API_FAILED, reason, model_api_category(exc)))
        finally:
            await runner.close()
        if caller.crashed is not None:  # our own code failed under the runner: never hidden
            raise caller.crashed

    async def _turns(
        self, agent: Subagent, caller: ModelCaller, runner: Any, known: set[str]
    ) -> recovery.ModelStopped | None:
        """Run the model's turns; why the code ended them (None when the model ended by itself)."""
        clock, deadline_at = agent.runtime.clock, agent.state.deadline
        stop: recovery.ModelStopped | None = None
        wants_more = False
        came = recovery.ModelStopped(ModelStop.DEADLINE, "the deadline came while the model was working")
        with anyio.move_on_after(max(deadline_at - clock.now(), 0.0)) as deadline:
            async for message in runner:
                input_tokens, output_tokens = self.budget.spend(message.usage)
                caller.model = caller.model.plus(1, input_tokens, output_tokens)
                wants_more = message.stop_reason == "tool_use"
                _refuse_unknown_tools(agent, message, known)
                if wants_more and self.budget.exhausted:
                    spent = f"the query's token budget is spent ({self.budget.describe()}); its calls were not made"
                    stop = recovery.ModelStopped(ModelStop.TOKENS, spent)
                    break
                if wants_more and clock.now() >= deadline_at:
                    stop = came
                    break
        if deadline.cancelled_caught:
            return came
        if stop is None and wants_more and not caller.ended_loop:  # the runner ended it at max_turns
            return recovery.ModelStopped(ModelStop.TURNS, f"the model used its {caller.model.turns} turns")
        return stop


def _refuse_unknown_tools(agent: Subagent, message: BetaMessage, known: set[str]) -> None:
    """A tool the source does not have never runs (the SDK answers the model itself); say so here."""
    for block in message.content:
        if block.type == "tool_use" and block.name not in known:
            agent.feed(recovery.ModelRefused(block.name))


@contextlib.asynccontextmanager
async def claude_subagents(
    settings: ClaudeSettings | None, budget: TokenBudget | None = None
) -> AsyncIterator[ClaudeSubagents | None]:
    """Claude mode's driver with its client open; None for the deterministic mode, or when there is no key."""
    if settings is None or not settings.api_key:
        yield None
        return
    await load_sdk()  # off the event loop: the sources' sessions open meanwhile
    async with settings.client() as client:
        yield ClaudeSubagents(settings, client, budget or TokenBudget(settings.token_budget))


async def _code_takes_over(
    agent: Subagent, why: str, category: ErrorCategory | None = None
) -> SubagentReport:
    """The model cannot carry the task: the code makes the planned call, as in deterministic mode."""
    step = await agent.carry(agent.feed(recovery.TakeOver(why, category)))
    assert isinstance(step, recovery.Ended)  # the code decides every step after it takes over
    return recovery.report(agent.state, step.outcome)
