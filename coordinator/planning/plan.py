"""Plan: a research query becomes a DAG of tasks, and what was not planned.

A plan is made by the deterministic planner (``coordinator.planning.planner``) or by Claude
(``coordinator.llm``); either way it is checked here before anything runs. An argument that comes
from an upstream task is a ``Ref``: ``Ref("customer", "id")`` is the ``id`` of the one record the
``customer`` task returned (several records make the reference ambiguous, and its task is blocked
with the candidates listed). A plan that is not acyclic, or that names an unknown source or tool, or
refers to a task it does not depend on, is refused.

What the query named or asked that no task researches is listed in ``unplanned``, each with why and
what to do; a plan with anything unplanned can only end ``partial``.
"""

from __future__ import annotations

import graphlib
import heapq
from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from coordinator.planning.query_error import QueryError
from coordinator.planning.tools import LOOKUPS
from sources.catalogue import TOOLS
from sources.deferred import deferred
from subagents.task import Task

if TYPE_CHECKING:
    import networkx as nx
else:
    # Loaded only for whoever asks for ``Plan.graph``: checking and ordering a plan need only the
    # standard library's graphlib (networkx costs `research ask` about 0.1 s of CPU to import).
    nx = deferred("networkx")

__all__ = [
    "PLANNING_SHARE",
    "FollowUp",
    "Plan",
    "PlanError",
    "PlannedTask",
    "QueryError",
    "Ref",
    "SpanRole",
    "Unplanned",
    "said_share",
]

# The query's deadline covers planning and the brief too. Planning (a model's, or listing the tools of
# a registered source never listed) may take at most this share of it, so the work always has the
# rest; the brief gets what is left (and the grace).
PLANNING_SHARE = 0.25


class PlanError(ValueError):
    """A plan that must not run: cyclic, or naming a source, tool or task that does not exist."""


@dataclass(frozen=True)
class Ref:
    """An argument taken from the one record an upstream task returned."""

    task: str
    field: str

    def __str__(self) -> str:
        return f"{{{self.task}.{self.field}}}"


@dataclass(frozen=True)
class PlannedTask(Task):
    """A subagent's task as planned: its arguments may still hold ``Ref``s to what upstream tasks return.

    The task's own fields (id, source, tool, arguments, purpose) are ``Task``'s; a plan adds what it
    waits for and why it was planned. ``resolved`` is the task a subagent runs once the ``Ref``s are filled.
    """

    depends_on: tuple[str, ...] = ()
    why: str = ""

    def resolved(self, arguments: dict[str, Any]) -> Task:
        """The task to run: this one with ``arguments``, its upstream values filled in."""
        return Task(self.id, self.source, self.tool, arguments, purpose=self.purpose, follows=self.follows)


@dataclass(frozen=True)
class Unplanned:
    """Something the query named or asked that no task researches: what, why, and what to do."""

    what: str
    why: str
    next_step: str

    def __str__(self) -> str:
        return f"{self.what}: {self.why}; {self.next_step}"


@dataclass(frozen=True)
class FollowUp:
    """An ask a round cannot place yet: it waits for the findings of the task ``after``
    (``coordinator.planning.rounds`` places it in the next round).

    ``ask`` says what it adds once they are in:
    - "refund": an eligibility check on the one of a customer's orders (found by the orders search
      ``after``) the question points at by what it holds (``words``), its total (``totals``), its
      ``status`` or being the ``latest``, or on ``order``, named, whose lookup is ``after`` ("half back
      on ORD-10023"); of ``amount``, or else ``share`` of the order's total;
    - "tickets": the tickets of that order (of each such order, up to a bound, when ``each``);
    - "order": nothing more than that order itself, found already ("her cafetiere order"): several
      matching where the question means one is a gap listing them;
    - "fallback": a second check on ``order`` made only if the check ``after`` was refused ("if
      not, what about a third?"): of ``amount``, or ``share`` of it.
    - "related": the articles linked to the best match of the policy search ``after`` ("the returns
      policy and whatever it points to"), up to ``depth`` links away where the question says.
    A refund follow-up with ``fallback_amount`` or ``fallback_share`` leaves such a fallback in turn.
    """

    ask: str
    after: str
    amount: float | None = None
    share: float | None = None
    words: tuple[str, ...] = ()  # the question's words that may name what the order holds
    totals: tuple[float, ...] = ()  # amounts that may be the order's total ("the one of £750")
    status: str | None = None  # "the returned one"
    latest: bool = False  # "her last order"
    each: bool = False  # "tickets on them": every order that matches
    dated: bool = False  # "her October order": the orders search was narrowed to the dates asked
    order: str = ""  # a fallback's order
    fallback_amount: float | None = None
    fallback_share: float | None = None
    depth: int | None = None  # a related follow-up's count of links ("two hops out")

    @property
    def picks(self) -> bool:
        """Whether the question says which order beyond an amount alone: "refund £45 for
        CUST-00042" names no order to look for (the amount is listed as not placed, as in one round)."""
        return bool(self.words or self.status or self.latest or self.dated or self.share is not None)

    @property
    def amounts_placed(self) -> tuple[float, ...]:
        """The amounts the question names that this follow-up places once its round comes."""
        if self.ask == "fallback":
            return (self.amount,) if self.share is None and self.amount is not None else ()
        return tuple(a for a in (*self.totals, self.amount, self.fallback_amount) if a is not None)

    @property
    def how_much(self) -> bool:
        """Whether a refund follow-up knows its amount ("refund her grinder" does not: not complete)."""
        return self.ask != "refund" or self.amount is not None or self.share is not None

    def describe(self) -> dict[str, Any]:
        return {name: value for name, value in vars(self).items() if value not in (None, (), False, "")}

    def __str__(self) -> str:
        """What the next round adds, in words ("after orders: a refund check of its total on the order
        whose items match 'grinder'")."""
        whole = "it" if self.ask == "fallback" else "its total"
        how_much = (
            f"of {said_share(self.share)} of {whole}" if self.share not in (None, 1.0)
            else f"of {whole}" if self.share == 1.0
            else f"of £{self.amount:g}" if self.amount is not None else ""
        )  # fmt: skip
        if self.ask == "related":
            return f"after {self.after}: the articles linked to the best match" + (
                f", up to {self.depth} links away" if self.depth else ""
            )
        if self.ask == "fallback":
            return f"if billing refuses {self.after}: a second refund check {how_much} on {self.order}"
        clauses = [
            *([f"whose items match '{' '.join(self.words)}'"] if self.words else []),
            *([f"whose total is {' or '.join(f'£{t:g}' for t in self.totals)}"] if self.totals else []),
            *([f"with status {self.status}"] if self.status else []),
        ]
        which = self.order or " ".join(
            ["the", *(["latest"] if self.latest else []), "orders" if self.each else "order", *clauses]
        )
        what = "its tickets" if self.ask == "tickets" else f"a refund check {how_much}".rstrip()
        return f"after {self.after}: {what} on {which}"


def said_share(share: float) -> str:
    """A part of an amount as people say it: "half", "a third", "two thirds"."""
    named = {
        1 / 2: "half",
        1 / 3: "a third",
        2 / 3: "two thirds",
        1 / 4: "a quarter",
        3 / 4: "three quarters",
    }
    return next((said for part, said in named.items() if abs(part - share) < 1e-9), f"{share:.0%}")


@dataclass(frozen=True)
class SpanRole:
    """A span of the query and what became of it: the tasks that use it, or why none does. Here, with
    the plan that carries it, rather than with the accounting that finds it: a Ray worker unpickles plans
    and must not load the query's reader."""

    text: str
    role: str  # asks, story, courtesy, not understood, no source holds
    tasks: tuple[str, ...] = ()
    how: str = ""  # how it was read: keywords, the matcher's reading, a story's date...

    def describe(self) -> dict[str, object]:
        return {"text": self.text, "role": self.role, "tasks": list(self.tasks), "how": self.how}


@dataclass
class Plan:
    query: str
    tasks: dict[str, PlannedTask]
    unplanned: tuple[Unplanned, ...] = ()
    notes: tuple[str, ...] = ()  # how the query was read: typos corrected, the calendar dates are relative to
    # Every span of the query and its role (found by coordinator.planning.accounting): the deterministic planner's.
    spans: tuple[SpanRole, ...] = ()
    # Asks that wait for a round's findings to say which record they are about (the next round's).
    follow_ups: tuple[FollowUp, ...] = ()
    rounds: int = 1  # how many rounds planned it: each later one added tasks that follow findings
    # The intent rules that fired (coordinator.planning.rules.RULES), by name: the deterministic planner's.
    rules: tuple[str, ...] = ()
    # Ids no tool looks up by their id ("TCK-20051"), looked for among the records the tasks find
    # instead; the report lists one not among them (``coordinator.reporting.synthesize``).
    looked_for: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        query: str,
        tasks: list[PlannedTask],
        unplanned: tuple[Unplanned, ...] = (),
        notes: tuple[str, ...] = (),
        *,
        offered: Mapping[str, Collection[str]] = TOOLS,
        spans: tuple[SpanRole, ...] = (),
        follow_ups: tuple[FollowUp, ...] = (),
        rounds: int = 1,
        rules: tuple[str, ...] = (),
        looked_for: tuple[str, ...] = (),
    ) -> Plan:
        """Build and check a plan; a plan that must not run raises ``PlanError``.

        ``offered`` is every source's tools (the demo sources' by default; with registered ones, the
        planner's catalog): a task may name no other.
        """
        by_id: dict[str, PlannedTask] = {}
        for task in tasks:
            if task.id in by_id:
                raise PlanError(f"two tasks are named {task.id!r}")
            if task.source not in offered:
                raise PlanError(
                    f"task {task.id!r} names unknown source {task.source!r}; sources are {', '.join(offered)}"
                )
            if task.tool not in offered[task.source]:
                raise PlanError(
                    f"task {task.id!r} names unknown tool {task.tool!r} of {task.source}; "
                    f"it offers {', '.join(sorted(offered[task.source]))}"
                )
            by_id[task.id] = task
        for task in tasks:
            for upstream in task.depends_on:
                if upstream not in by_id:
                    raise PlanError(f"task {task.id!r} depends on {upstream!r}, which is not in the plan")
            for value in task.arguments.values():
                if isinstance(value, Ref) and value.task not in task.depends_on:
                    raise PlanError(f"task {task.id!r} uses {value} but does not depend on {value.task!r}")
        try:
            _sorter(by_id).prepare()
        except graphlib.CycleError as exc:
            cycle = " -> ".join(exc.args[1][:-1])  # the cycle's tasks, its first one repeated last
            raise PlanError(f"the plan has a cycle ({cycle}); a task cannot wait for itself") from None
        for follow_up in follow_ups:
            if follow_up.after not in by_id:
                raise PlanError(f"a follow-up waits for {follow_up.after!r}, which is not in the plan")
        return cls(
            query=query, tasks=by_id, unplanned=unplanned, notes=notes, spans=spans,
            follow_ups=follow_ups, rounds=rounds, rules=rules, looked_for=looked_for,
        )  # fmt: skip

    def rebuilt(
        self,
        tasks: list[PlannedTask],
        unplanned: tuple[Unplanned, ...],
        *,
        offered: Mapping[str, Collection[str]],
        **changed: Any,
    ) -> Plan:
        """A plan of the same query with ``tasks`` and ``unplanned``, checked again as ``of`` checks.
        Everything else this plan carries (its notes, spans, follow-ups, rounds, rules, the ids looked
        for, and any field added later) is kept unless ``changed`` names it: a round that grows a plan
        cannot drop what it did not mean to."""
        carried = {
            each.name: getattr(self, each.name)
            for each in fields(self)
            if each.name not in ("query", "tasks", "unplanned")
        }
        return Plan.of(self.query, tasks, unplanned, offered=offered, **{**carried, **changed})

    def order(self) -> list[PlannedTask]:
        """The tasks in an order that puts every task after what it depends on, and of the tasks free to
        go next the first by name (networkx's lexicographical topological sort)."""
        sorter = _sorter(self.tasks)
        sorter.prepare()
        ready = list(sorter.get_ready())
        heapq.heapify(ready)
        ordered = []
        while ready:
            task_id = heapq.heappop(ready)
            ordered.append(self.tasks[task_id])
            sorter.done(task_id)
            for freed in sorter.get_ready():
                heapq.heappush(ready, freed)
        return ordered

    @property
    def graph(self) -> nx.DiGraph:
        """The plan as a networkx graph, each task a node and each dependency an edge to its task."""
        graph = nx.DiGraph()
        graph.add_nodes_from(self.tasks)
        graph.add_edges_from((up, task.id) for task in self.tasks.values() for up in task.depends_on)
        return graph

    @property
    def gates(self) -> dict[str, tuple[str, ...]]:
        """For each task about a customer named by id, the lookup of that customer it waits for without using
        its output (``gated_by``): there an erased or restricted record is found, so no task reads the
        customer's data before it has answered, nor at all if it did not find them (they end ``blocked``)."""
        lookups = {
            str(task.arguments.get("identifier", "")).strip().upper(): task.id
            for task in self.order()
            if f"{task.source}.{task.tool}" == LOOKUPS["customer_id"]
        }
        gates: dict[str, tuple[str, ...]] = {}
        for task in self.order():
            customer = task.arguments.get("customer_id")
            lookup = lookups.get(customer.strip().upper()) if isinstance(customer, str) else None
            if lookup is not None and lookup != task.id and lookup not in task.depends_on:
                gates[task.id] = (lookup,)
        return gates

    def sources(self) -> list[str]:
        """The sources the plan calls, in the order their first task runs."""
        return list(dict.fromkeys(task.source for task in self.order()))

    def describe(self) -> dict[str, Any]:
        """The plan as plain data (what `research plan --json` prints): tasks, dependencies, gates, gaps."""
        gates = self.gates
        return {
            "query": self.query,
            "tasks": [
                {
                    "id": task.id,
                    "source": task.source,
                    "tool": task.tool,
                    "arguments": {
                        name: str(value) if isinstance(value, Ref) else value
                        for name, value in task.arguments.items()
                    },
                    "purpose": task.purpose,
                    "why": task.why,
                    "depends_on": list(task.depends_on),
                    "gated_by": list(gates.get(task.id, ())),
                    **({"follows": task.follows} if task.follows else {}),
                }
                for task in self.order()
            ],
            "unplanned": [
                {"what": item.what, "why": item.why, "next_step": item.next_step} for item in self.unplanned
            ],
            "notes": list(self.notes),
            "spans": [span.describe() for span in self.spans],
            **({"follow_ups": [f.describe() for f in self.follow_ups]} if self.follow_ups else {}),
            **({"rounds": self.rounds} if self.rounds > 1 else {}),
            **({"rules": list(self.rules)} if self.rules else {}),
            **({"looked_for": list(self.looked_for)} if self.looked_for else {}),
        }


def _sorter(tasks: Mapping[str, PlannedTask]) -> graphlib.TopologicalSorter[str]:
    """The tasks and what each waits for, in the standard library's sorter (no networkx to import)."""
    return graphlib.TopologicalSorter({task_id: task.depends_on for task_id, task in tasks.items()})
