"""A plan checked and ordered with the standard library's graphlib: the order networkx gave, without it."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from coordinator.planning.plan import Plan, PlanError, PlannedTask
from tests.fresh_process import in_a_fresh_process
from tests.test_head_start import STORY


def _task(task_id: str, depends_on: tuple[str, ...] = ()) -> PlannedTask:
    return PlannedTask(
        task_id, "orders", "search_orders", {"customer_id": "CUST-00042"}, depends_on=depends_on
    )


@pytest.mark.parametrize("seed", range(40))
def test_the_order_is_networkx_lexicographical_topological_sort(seed: int) -> None:
    """Every task after what it waits for, and of the tasks free to go, the first by name."""
    chance = random.Random(seed)
    names = chance.sample([f"t{n}" for n in range(12)], chance.randint(1, 12))
    tasks = [  # each may wait for any named before it: a DAG
        _task(name, tuple(up for up in names[:at] if chance.random() < 0.3)) for at, name in enumerate(names)
    ]
    chance.shuffle(tasks)
    plan = Plan.of("q", tasks)
    expected = nx.DiGraph()
    expected.add_nodes_from(task.id for task in tasks)
    expected.add_edges_from((up, task.id) for task in tasks for up in task.depends_on)
    assert [task.id for task in plan.order()] == list(nx.lexicographical_topological_sort(expected))
    assert set(plan.graph.edges) == set(expected.edges)


def test_a_cycle_is_refused_and_named() -> None:
    with pytest.raises(PlanError, match=r"the plan has a cycle \((a -> b -> c|b -> c -> a|c -> a -> b)\)"):
        Plan.of("q", [_task("a", ("c",)), _task("b", ("a",)), _task("c", ("b",))])


def test_planning_the_story_query_loads_no_networkx() -> None:
    loaded = in_a_fresh_process(f"""
        import json, sys
        from coordinator.planning.planner import plan_query
        plan = plan_query({STORY!r})
        assert [task.id for task in plan.order()] == ["customer", "orders", "policies", "refund", "tickets"]
        print(json.dumps("networkx" in sys.modules))
    """)
    assert loaded is False
