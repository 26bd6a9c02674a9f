"""Render: live per-task progress while a query runs, then the report, with rich."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from coordinator.plan import Plan
from coordinator.report import ResearchReport, TaskSummary
from subagents.decisions import Decision

if TYPE_CHECKING:  # the subagent's module imports the mcp SDK, which rendering a report never needs
    from subagents.task import Task

__all__ = ["LiveProgress", "print_report", "print_task_table", "shown"]

_STATE_STYLE = {
    "ok": "green", "empty": "cyan", "escalated": "red", "blocked": "yellow", "deadline": "magenta",
    "running": "blue", "waiting": "dim",
}  # fmt: skip

_ACTION_WORDS = {
    "retry": "retry", "repair": "repaired", "elevate": "elevated", "escalate": "escalated",
    "accept_empty": "nothing found", "give_up": "gave up", "breaker_open": "circuit open", "hook_blocked": "blocked by hook",
    "to_model": "handed to the model", "refused": "repeat refused", "fallback": "code took over",
    "stop_model": "model stopped",
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


_WIDE_COLUMNS = 100  # the progress table names each task's tool from this width up


class LiveProgress:
    """A subagent observer that keeps one line per task up to date on the terminal."""

    def __init__(self, plan: Plan, console: Console) -> None:
        self._plan = plan
        self._status: dict[str, tuple[str, str]] = {
            task.id: ("waiting", f"after {', '.join(task.depends_on)}" if task.depends_on else "")
            for task in plan.order()
        }
        self._live = Live(console=console, refresh_per_second=8, transient=False)
        self._live.update(self._table())

    def _table(self) -> Table:
        rows = [(task.id, task.source, task.tool, *self._status[task.id]) for task in self._plan.order()]
        return _task_table(rows, self._live.console.width)

    def _set(self, task_id: str, state: str, detail: str) -> None:
        self._status[task_id] = (state, detail)
        self._live.update(self._table())

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
            self._set(task.id, task.state, _ending(task.state, task.attempts, _turns(task), task.decisions))

    def running(self) -> list[str]:
        """The tasks that have not ended yet (what an interrupted query leaves undone)."""
        return [task_id for task_id, (state, _) in self._status.items() if state in ("running", "waiting")]


def print_task_table(report: ResearchReport, console: Console) -> None:
    """The tasks as they ended: the table `research ask` keeps up to date while it runs."""
    rows = [
        (
            task.id,
            task.source,
            task.tool,
            task.state,
            _ending(task.state, task.attempts, _turns(task), task.decisions),
        )
        for task in report.tasks
    ]
    console.print(_task_table(rows, console.width))
    console.line()


def _task_table(rows: Sequence[tuple[str, str, str, str, str]], width: int) -> Table:
    """One row per task: id, source, tool, state, last step. At 80 columns (a pipe, CI, a small
    terminal) the tool's name would wrap every row: the task and its source say enough there."""
    wide = width >= _WIDE_COLUMNS
    columns = (
        ["task", "source", "tool", "state", "last step"] if wide else ["task", "source", "state", "last step"]
    )
    table = Table(*columns, box=None, pad_edge=False)
    for task_id, source, tool, state, detail in rows:
        cells = [task_id, source, tool] if wide else [task_id, source]
        table.add_row(
            *(Text(shown(cell)) for cell in cells),
            Text(state, style=_STATE_STYLE.get(state, "")),
            Text(shown(detail)),
        )
    return table


def _turns(task: TaskSummary) -> int:
    return task.model.turns if task.model is not None else 0


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
        tried = json.dumps(gap.attempted_query.arguments, ensure_ascii=False)
        console.print(Text(shown(f"    tried: {gap.attempted_query.tool} {tried}"), style="dim"))
        console.print(Text(f"    why:   {shown(gap.message)}", style="dim"))
        if gap.partial_results:
            kept = json.dumps(gap.partial_results, ensure_ascii=False)
            console.print(Text(f"    kept:  {shown(kept)}", style="dim"))
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
