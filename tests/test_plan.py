"""The planner: what a query names becomes a DAG of exactly the tasks it asks for; bad plans never run."""

from __future__ import annotations

import pytest

from coordinator.plan import Plan, PlanError, PlannedTask, QueryError, Ref, plan_query, read_query

STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
POLICY = "What is our policy on refunds for damaged items, and which of CUST-00042's orders qualify?"


def test_the_story_query() -> None:
    plan = plan_query(STORY)
    tasks = {task.id: task for task in plan.order()}
    assert set(tasks) == {"customer", "orders", "tickets", "refund", "policies"}
    assert tasks["customer"].arguments == {"identifier": "jane.doe@example.com"}
    assert tasks["orders"].arguments == {"customer_id": Ref("customer", "id")}
    assert tasks["tickets"].arguments == {"customer_id": Ref("customer", "id"), "status": "open"}
    assert tasks["refund"].arguments == {"order_id": "ORD-10023", "amount": 750.0}
    assert tasks["refund"].purpose == "refund research"
    assert set(plan.graph.edges) == {("customer", "orders"), ("customer", "tickets"), ("customer", "refund")}
    assert tasks["policies"].depends_on == ()  # policies start at once


def test_the_policy_query_plans_only_what_it_asks() -> None:
    plan = plan_query(POLICY)
    assert {task.id for task in plan.order()} == {"customer", "orders", "policies"}
    assert "refunds" in plan.tasks["policies"].arguments["query"]
    assert "damaged" in plan.tasks["policies"].arguments["query"]


def test_what_the_reader_extracts() -> None:
    reading = read_query(
        "Refund 45.50 GBP for cust-00042 on ord-10031, SKU-2210-wht, orders since 2026-10-01 before 2026-10-31"
    )
    assert reading.customer_ids == ["CUST-00042"] and reading.order_ids == ["ORD-10031"]
    assert reading.skus == ["SKU-2210-WHT"] and reading.amounts == [45.5]
    assert (reading.placed_after, reading.placed_before) == ("2026-10-01", "2026-10-31")
    plan = plan_query("Orders of jane.doe@example.com with SKU-4417-BLK since 2026-10-01")
    assert plan.tasks["orders"].arguments == {
        "customer_id": Ref("customer", "id"), "sku": "SKU-4417-BLK", "placed_after": "2026-10-01",
    }  # fmt: skip


def test_invoices_are_planned_when_asked() -> None:
    plan = plan_query("Show the invoices of jane.doe@example.com")
    assert plan.tasks["invoices"].tool == "list_invoices" and plan.tasks["invoices"].depends_on == (
        "customer",
    )


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("", "the query is empty"),
        ("   \n ", "the query is empty"),
        ("x" * 100_000, "keep it under 2,000"),
        ("Orders of CUST-00042\x00", "control character (U+0000)"),
        ("Orders of CUST-00042\x1b[31m", "control character (U+001B)"),
        ("hello, how are you?", "names nothing to research"),
        ("Orders since 2026-02-30 for CUST-00042", "2026-02-30 is not a real date"),
    ],
)
def test_bad_queries_say_what_to_do(query: str, fragment: str) -> None:
    with pytest.raises(QueryError) as caught:
        plan_query(query)
    assert fragment in str(caught.value)


def _task(task_id: str, depends_on: tuple[str, ...] = (), **fields: object) -> PlannedTask:
    values: dict = {
        "source": "orders",
        "tool": "search_orders",
        "arguments": {"customer_id": "CUST-00042"},
    } | fields
    return PlannedTask(task_id, depends_on=depends_on, **values)


@pytest.mark.parametrize(
    ("tasks", "fragment"),
    [
        ([_task("a", ("b",)), _task("b", ("a",))], "cycle"),
        ([_task("a", source="crm")], "unknown source 'crm'"),
        ([_task("a", tool="drop_orders")], "unknown tool 'drop_orders'"),
        ([_task("a", ("ghost",))], "depends on 'ghost'"),
        ([_task("a", arguments={"customer_id": Ref("b", "id")}), _task("b")], "does not depend on 'b'"),
        ([_task("a"), _task("a")], "two tasks are named 'a'"),
    ],
)
def test_plans_that_must_not_run_are_refused(tasks: list[PlannedTask], fragment: str) -> None:
    with pytest.raises(PlanError, match=fragment):
        Plan.of("q", tasks)


def test_a_customer_id_in_the_query_needs_no_resolving_first() -> None:
    plan = plan_query(
        "Investigate CUST-00042: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
    )
    assert set(plan.graph.edges) == set()  # every task starts at once
    assert plan.tasks["orders"].arguments == {"customer_id": "CUST-00042"}
    assert plan.tasks["tickets"].arguments == {"customer_id": "CUST-00042", "status": "open"}
    assert plan.tasks["customer"].arguments == {"identifier": "CUST-00042"}
