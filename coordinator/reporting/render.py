"""Render: live per-task progress while a query runs, then the report, with rich."""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from coordinator.planning.plan import Plan
from coordinator.reporting.report import ResearchReport, TaskSummary
from coordinator.reporting.sentences import describe, plain, record_id
from subagents.decisions import Decision, TaskState

if TYPE_CHECKING:  # the subagent's module imports the mcp SDK, which rendering a report never needs
    from subagents.task import Task

__all__ = ["LiveProgress", "print_report", "print_task_table", "shown"]

_STATE_STYLE = {
    TaskState.OK: "green", TaskState.EMPTY: "cyan", TaskState.ESCALATED: "red", TaskState.BLOCKED: "yellow",
    TaskState.DEADLINE: "magenta",
    "running": "blue", "waiting": "dim",
}  # fmt: skip

_ACTION_WORDS = {
    "retry": "retry", "repair": "repaired", "elevate": "elevated", "escalate": "escalated",
    "accept_empty": "nothing found", "give_up": "gave up", "breaker_open": "circuit open", "hook_blocked": "blocked by hook",
    "to_model": "handed to the model", "refused": "repeat refused", "fallback": "code took over",
    "stop_model": "model stopped",
    "outcome_unknown": "outcome unknown, not resent", "approved": "approved", "not_approved": "not approved",
}  # fmt: skip


# What a terminal would act on or draw invisibly rather than show: control characters (ESC, CR, ...),
# format characters (the bidi overrides and isolates U+202A-U+202E, U+2066-U+2069, zero-width ones,
# tags), the line and paragraph separators U+2028 and U+2029, and lone surrogates (bytes that were
# not UTF-8 on the command line).
_UNSHOWN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def shown(text: str, *, keep: str = "\n\t") -> str:
    """``text`` (a query, a span of it, what a source said) as it may reach a terminal: every control,
    format or separator character escaped, e.g. U+202E as ``\\u202e``, so that what is printed is what
    was given, in its order; the characters of ``keep`` (a new line, a tab) stay as they are.

    Every echo of such text to a terminal goes through here; JSON output does not (it is data).
    """
    if text.isprintable():  # none of them (and no other character to look at): the common case
        return text
    return "".join(
        _escaped(char) if char not in keep and unicodedata.category(char) in _UNSHOWN else char
        for char in text
    )


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


# The task table's columns. Where they do not all fit (80 columns: a pipe, CI, a small terminal), the
# source goes: the least useful, as each tool's name says its source (customer_lookup, search_orders)
# and the report's citations name it. The task, its tool and its state are never cut nor wrapped;
# the last step wraps if it must.
_TASK_COLUMNS = ("task", "source", "tool", "state", "last step")
_LEAST_USEFUL = "source"
# The last step's width the choice counts on, whatever it says now: "escalated: business (2 attempts)".
# The live table keeps its columns while its last steps change.
_LAST_STEP_WIDTH = 32


class LiveProgress:
    """A subagent observer that keeps one line per task up to date on the terminal.

    A task still running shows how long its current step has taken, counted as the table is drawn
    (four times a second): a source that hangs shows its seconds going up, never a still screen."""

    def __init__(self, plan: Plan, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self._plan = plan
        self._clock = clock
        self._console = console
        self._status: dict[str, tuple[str, str]] = {
            task.id: ("waiting", f"after {', '.join(task.depends_on)}" if task.depends_on else "")
            for task in plan.order()
        }
        self._since: dict[str, float] = {}  # when each running task's current step began
        self._added: dict[str, tuple[str, str]] = {}  # a later round's tasks: source and tool, as they start
        self._live = Live(console=console, refresh_per_second=4, transient=False, get_renderable=self._table)

    def _table(self) -> Table:
        rows = [(task.id, task.source, task.tool, *self._shown(task.id)) for task in self._plan.order()]
        rows += [
            (task_id, source, tool, *self._shown(task_id)) for task_id, (source, tool) in self._added.items()
        ]
        return _task_table(rows, self._console.width)

    def _shown(self, task_id: str) -> tuple[str, str]:
        state, detail = self._status[task_id]
        if state != "running" or task_id not in self._since:
            return state, detail
        waited = self._clock() - self._since[task_id]
        return state, f"{detail}, {waited:.0f} s" if waited >= 1 else detail

    def _set(self, task_id: str, state: str, detail: str) -> None:
        self._status[task_id] = (state, detail)
        if state == "running":
            self._since[task_id] = self._clock()
        if self._live.is_started:  # drawn now; before it starts or once stopped, drawn when it stops
            self._live.refresh()

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop updating the table (idempotent): what is printed next goes below it."""
        if self._live.is_started:
            self._live.stop()
            self._live.console.line()

    def attempt(self, task: Task, attempt: int, arguments: dict[str, Any]) -> None:
        if task.id not in self._plan.tasks:  # a task a later round added: shown from its first attempt
            self._added[task.id] = (task.source, task.tool)
        self._set(task.id, "running", f"attempt {attempt}")

    def decided(self, task: Task, decision: Decision) -> None:
        words = _ACTION_WORDS[decision.action]
        if decision.action == "retry":
            words = f"{decision.reason.split(' after ')[0]} in {decision.backoff_ms / 1000:.1f} s"
        category = (
            f": {decision.category}"
            if decision.category and decision.action not in ("retry", "repair")
            else ""
        )
        self._set(task.id, "running", f"{words}{category}")

    def ended(self, task_id: str, state: str, attempts: int, decisions: Sequence[Decision]) -> None:
        self._set(task_id, state, _ending(state, attempts, 0, decisions))

    def finished(self, report: ResearchReport) -> None:
        for task in report.tasks:
            self._set(task.id, task.state, _ended(task))

    def running(self) -> list[str]:
        """The tasks that have not ended yet (what an interrupted query leaves undone)."""
        return [task_id for task_id, (state, _) in self._status.items() if state in ("running", "waiting")]


def print_task_table(report: ResearchReport, console: Console) -> None:
    """The tasks as they ended: the table `research ask` keeps up to date while it runs."""
    rows = [(task.id, task.source, task.tool, task.state, _ended(task)) for task in report.tasks]
    console.print(_task_table(rows, console.width))
    console.line()


def _task_table(rows: Sequence[tuple[str, str, str, str, str]], width: int) -> Table:
    """One row per task: id, source, tool, state, last step, within ``width`` columns."""
    columns: tuple[str, ...] = _TASK_COLUMNS
    if _task_table_width(rows, columns) > width:
        columns = tuple(column for column in columns if column != _LEAST_USEFUL)
    table = Table(*columns, box=None, pad_edge=False)
    for column in table.columns:
        column.no_wrap = column.header != "last step"
    for task_id, source, tool, state, detail in rows:
        cells = {"task": Text(shown(task_id)), "source": Text(shown(source)), "tool": Text(shown(tool))}
        cells |= {"state": Text(state, style=_STATE_STYLE.get(state, "")), "last step": Text(shown(detail))}
        table.add_row(*(cells[column] for column in columns))
    return table


def _task_table_width(rows: Sequence[tuple[str, str, str, str, str]], columns: Sequence[str]) -> int:
    """How wide the table is with these columns: each its widest cell (the last step as wide as
    ``_LAST_STEP_WIDTH``, the state as its longest word), two spaces between them."""
    widths = {
        name: max([len(name), *(cell_len(shown(row[at])) for row in rows)])
        for at, name in enumerate(_TASK_COLUMNS[:3])
    }
    widths |= {"state": max(len(state) for state in _STATE_STYLE), "last step": _LAST_STEP_WIDTH}
    return sum(widths[column] for column in columns) + 2 * (len(columns) - 1)


def _ended(task: TaskSummary) -> str:
    """How a reported task ended (``_ending``), its model's turns counted in Claude mode."""
    turns = task.model.turns if task.model is not None else 0
    return _ending(task.state, task.attempts, turns, task.decisions)


def _ending(state: str, attempts: int, turns: int, decisions: Sequence[Decision]) -> str:
    """How a task ended, in a few words: its last decision and what it took."""
    took = f"{attempts} attempt{'' if attempts == 1 else 's'}"
    if turns:  # Claude mode: the model's turns too
        took += f", {turns} turn{'' if turns == 1 else 's'}"
    last = decisions[-1] if decisions else None
    if last is None:
        return took
    if state == "ok":
        return f"recovered by {last.action} ({took})"
    category = f": {last.category}" if last.category else ""
    return f"{_ACTION_WORDS[last.action]}{category} ({took})"


def print_report(report: ResearchReport, console: Console) -> None:
    """The report for people. What it quotes (the query, the findings, what a source said) is
    ``shown``: a control or bidi character in it is printed escaped, never acted on by the terminal."""
    style = "green" if report.status == "complete" else "yellow"
    console.print(Text(f"{report.status.upper()}: {shown(report.query)}", style=f"bold {style}"))
    console.print(Text("\nAnswer", style="bold"))
    for line in shown(report.answer).splitlines():
        console.print(Text(f"  {line}", style="yellow" if line.startswith("GAP") else ""))
    console.print(Text("\nFindings", style="bold"))
    for finding in report.findings:
        console.print(
            Text.assemble("  ", (f"[{shown(finding.citation)}]", "cyan"), f" {shown(finding.text)}")
        )
    if report.gaps or report.unplanned:
        console.print(Text("\nGaps", style="bold"))
    for item in report.unplanned:
        what, next_step = shown(item.what), shown(item.next_step)
        console.print(
            Text.assemble(("  not researched: ", "yellow"), (what, "yellow"), " -> ", (next_step, "bold"))
        )
        console.print(Text(f"    why:   {shown(item.why)}", style="dim"))
    for gap in report.gaps:
        head = shown(f"  {gap.task} ({gap.source}): {gap.state}, {gap.error_category or 'no category'}")
        console.print(Text.assemble((head, _STATE_STYLE[gap.state]), " -> ", (shown(gap.way_out), "bold")))
        tried = _called(gap.attempted_query.tool, gap.attempted_query.arguments)
        console.print(Text(shown(f"    tried: {tried}"), style="dim"))
        console.print(Text(f"    why:   {shown(gap.message)}", style="dim"))
        for line in _kept(gap.attempted_query.tool, gap.partial_results):
            console.print(Text(f"    kept:  {shown(line)}", style="dim"))
    if report.escalations:
        console.print(
            Text(f"\n{len(report.escalations)} escalation(s) need a human: see the gaps above.", style="bold")
        )
    if report.tokens is not None:
        per_agent = [
            ("planner", report.planning.input_tokens + report.planning.output_tokens),
            ("brief", report.synthesis.input_tokens + report.synthesis.output_tokens),
            *(
                (t.id, t.model.input_tokens + t.model.output_tokens)
                for t in report.tasks
                if t.model is not None
            ),
        ]
        spent = ", ".join(f"{name} {tokens:,}" for name, tokens in per_agent)
        console.print(
            Text(f"\nClaude: {report.tokens.used:,} of {report.tokens.limit:,} tokens ({spent})", style="dim")
        )
    for note in report.notes:
        console.print(Text(f"\nnote: {shown(note)}", style="dim"))
    console.print(Text(f"\ntrace {report.trace_id}", style="dim"))


def _called(tool: str, arguments: dict[str, Any]) -> str:
    """A call as ``research plan`` writes one: ``refund_eligibility(order_id="ORD-10023", amount=750.0)``."""
    shown_arguments = ", ".join(
        f"{name}={json.dumps(value, ensure_ascii=False) if not isinstance(value, dict | list) else plain(value, nested=True)}"
        for name, value in arguments.items()
    )
    return f"{tool}({shown_arguments})"


# At most this many of a gap's partial results are read out, then how many more there are.
_MOST_KEPT = 3


def _kept(tool: str, records: list[Any]) -> list[str]:
    """A gap's partial results as sentences, one line each (the first few): never as JSON."""
    lines = []
    for record in records[:_MOST_KEPT]:
        cited = record_id(record)
        lines.append(describe(tool, record) if cited == "-" else f"{cited}: {describe(tool, record)}")
    if len(records) > _MOST_KEPT:
        lines.append(f"and {len(records) - _MOST_KEPT} more")
    return lines
