"""A mention named only to be left out (negated, excluded, contrasted, quoted) is not researched, is no
refund target, and is listed as not researched with why, and no action offered on it."""

from __future__ import annotations

import re

import pytest

from coordinator.planning.planner import plan_query
from coordinator.planning.writes import asked_writes

_IDS = {"order": "ORD-10134", "customer": "CUST-00077", "email": "jane.doe@example.com"}
_KEPT = {"order": "ORD-10031", "customer": "CUST-00042", "email": "sam.lee@example.com"}
_FORMS = ("not about {x}", "not {x}", "other than {x}", "except {x}", "unlike {x}", "rather than {x}",
          "instead of {x}", "excluding {x}", "never mind {x}", "leave aside {x}", "leaving aside {x}",
          "leaving out {x}", "leave out {x}", "not counting {x}", "not including {x}")  # fmt: skip


def _used(query: str) -> set[str]:
    plan = plan_query(query)
    return {str(value) for task in plan.tasks.values() for value in task.arguments.values()}


def _listed(query: str, value: str) -> str:
    entries = [item for item in plan_query(query).unplanned if item.what == value]
    assert len(entries) == 1, plan_query(query).unplanned
    assert "refund" not in entries[0].next_step and "e.g." not in entries[0].next_step
    return entries[0].why


def test_the_issue_s_question_researches_and_offers_nothing_on_the_excluded_order() -> None:
    query = "Is a £45 refund on ORD-10031 allowed? This is not about ORD-10134."
    plan = plan_query(query)
    assert "ORD-10134" not in _used(query) and "ORD-10031" in _used(query)
    assert not any("ORD-10134" in item.what and item.what != "ORD-10134" for item in plan.unplanned)
    assert _listed(query, "ORD-10134") == "the question names it only to leave it out ('not about ORD-10134')"
    assert asked_writes(query).writes == ()


def test_a_quoted_mention_is_not_researched() -> None:
    query = 'Unlike "ORD-10134", which must never be refunded, is a £45 refund on ORD-10031 allowed?'
    assert "ORD-10134" not in _used(query)
    assert "leave it out" in _listed(query, "ORD-10134")


def test_a_positive_mention_beside_an_excluded_one_keeps_working() -> None:
    query = "Refund £45 — not on ORD-10134 but on ORD-10031"
    assert "ORD-10134" not in _used(query)
    assert [(w.target, w.amount) for w in asked_writes(query).writes] == [("ORD-10031", 45.0)]
    assert any(t.tool == "issue_refund" and t.arguments["order_id"] == "ORD-10031"
               for t in plan_query(query).tasks.values())  # fmt: skip
    query = "Investigate not jane.doe@example.com but CUST-00077"
    assert "CUST-00077" in _used(query) and "jane.doe@example.com" not in _used(query)


def test_a_negated_verb_does_not_leave_its_object_out_of_research() -> None:
    query = "do not refund £45 on ORD-10031"
    assert "ORD-10031" in _used(query)
    assert asked_writes(query).writes == ()


def test_an_id_written_in_quotes_alone_is_named() -> None:
    assert "ORD-10031" in _used("where is 'ORD-10031'?")


@pytest.mark.parametrize("form", _FORMS)
@pytest.mark.parametrize("kind", sorted(_IDS))
@pytest.mark.parametrize("first", [True, False])
def test_generated_left_out_forms(form: str, kind: str, first: bool) -> None:
    left, kept = _IDS[kind], _KEPT[kind]
    ask = f"what are the recent orders of {kept}" if kind != "order" else f"what is the status of {kept}"
    exclusion = form.format(x=left)
    query = f"{exclusion.capitalize()}: {ask}?" if first else f"{ask}, {exclusion}?"
    used = _used(query)
    assert left not in used, query
    assert kept in used, query
    assert "leave it out" in _listed(query, left), query
    # The words that leave it out are neither searched for nor listed as not understood.
    leaving = set(re.findall(r"[a-z]+", form.format(x="").lower()))
    searched = {word for value in used for word in re.findall(r"[a-z]+", value.lower())}
    assert not leaving & searched, (query, searched)
    assert [item.what for item in plan_query(query).unplanned] == [left], query
