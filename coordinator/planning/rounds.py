"""Rounds: the plan grows from what the first round found, as a support agent reads a customer's
orders before checking a refund on "the grinder".

A question may point at a record through another record: "can we refund Mr Patel's grinder in
full?" is about the one of his orders whose items are a grinder, and "in full" is that order's
total. The first round cannot name that order, so the planner leaves a ``FollowUp`` on the plan
(what is asked, which orders search will say which order, how the question picks it). Once that
search has answered, ``next_round`` reads its records, picks the order (what it holds, its total,
its status, the latest), derives the amount (the total, a half, a third), and adds the tasks to the
same plan, each saying the finding it follows and why. A second check the question makes
conditional on the first ("if not, what about a third?") is a follow-up of that check, added in the
round after only if billing refused the first. Nothing is added that the findings do not justify:
no order matched, or several where the question means one, is a gap listing the candidates; where
it means several ("tickets on them"), each is researched, up to ``MOST_CHOSEN``.

Pure: findings in, a plan out; the coordinator runs the rounds (``coordinator.core``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from coordinator.planning.lexicon import ANY_ITEM_WORDS, COUNT_WORDS, PRODUCT_WORDS, SHARE_WORDS
from coordinator.planning.money import share_said, shares_said
from coordinator.planning.plan import FollowUp, Plan, PlannedTask, Unplanned, said_share
from sources.catalogue import TOOLS
from sources.domain import pounds

if TYPE_CHECKING:  # a round is planned from findings, not from reading the query again
    from coordinator.planning.reading import Reading

__all__ = [
    "MAX_ROUNDS",
    "MOST_CHOSEN",
    "asks_money_back",
    "awaiting",
    "awaiting_links",
    "fallback_of",
    "follow_up",
    "newest",
    "next_round",
    "on_the_order",
    "refunds_all",
    "second_ask_at",
    "singular",
    "words_read",
]

# The first round, the follow-ups its findings justify, and a second check conditional on one of them.
MAX_ROUNDS = 3
# Most orders one selection researches where the question means several ("tickets on them"); more
# than this, or several where it means one, is a gap that lists them, for the user to say which.
MOST_CHOSEN = 3
_REFUND_PURPOSE = "refund research"  # the broker grants billing's records for this purpose

# --- how a question says which order and how much (the vocabulary of the rounds, in one place) -------

# "If not, what about a third?", "if that's a no", "if it gets refused": the second check is made only
# when the first is refused.
_CONDITIONAL = re.compile(
    r"\b(?:if not|if (?:we|she|he|they) can'?t|if (?:that|it)(?:'s| is) (?:too much|a no)"
    r"|if (?:that|it) (?:gets|is) refused|failing that|otherwise|if that fails)\b"
)
_ALTERNATIVE = re.compile(r"\b(?:how about|what about|try|instead)\b")
# An order picked by its status, and the latest one.
_STATUSES = (
    (re.compile(r"\b(?:returned|(?:sent|send|sending) (?:it |them )?back)\b"), "returned"),
    (re.compile(r"\bprocessing\b"), "processing"),
    (re.compile(r"\bcancel(?:l?ed)?\b"), "cancelled"),
    (re.compile(r"\b(?:was|were|got|been|that) (?:actually )?delivered\b"), "delivered"),
    # "shown as shipped", "the shipped one": said of the order's state, not "when will it be shipped"
    (
        re.compile(
            r"\b(?:shown|marked|listed|showing|shows|says|that's|that is|which is|still|already) (?:as )?shipped\b"
            r"|\bshipped (?:one|order)\b"
        ),
        "shipped",
    ),
)
_LATEST = re.compile(r"\b(?:latest|most recent|newest|last order|recent order)\b")
# Tickets asked of the order the question points at ("any tickets on it"), or of several ("on them").
_ON_THE_ORDER = re.compile(
    r"\b(?:on|about|for) (?:it|that|that order|this order|the order|the one|them|those|these)\b"
    r"|\b(?:on|about|for) (?:their|his|her) (?:newest|latest|most recent|last) order\b"
    # an order picked by its total: "the £206 one: any tickets?", "the one of £206"
    r"|\bthe £\s?\d[\d,]*(?:\.\d\d)? (?:one|order)\b|\bthe (?:one|order) (?:of|for|at) £\s?\d"
)
_EACH = re.compile(r"\b(?:on|about|for) (?:them|those|these)\b|\beach\b")


def words_read(text: str) -> set[str]:
    """The words of ``text`` the rounds read (a share, a status, a conditional second ask...): the
    accounting of the query's words counts them as used where a follow-up or an orders search is planned."""
    patterns = (*shares_said(), _CONDITIONAL, _ALTERNATIVE, _LATEST, *(said for said, _ in _STATUSES))
    lowered = text.lower()
    return {
        word
        for pattern in patterns
        for match in pattern.finditer(lowered)
        for word in re.findall(r"[a-z]+", match[0])
    }


# "Refund the lot": the whole of an order, not "everything about the customer".
_REFUND_ALL = re.compile(r"\b(?:refund|refunding|back on) (?:the (?:whole )?lot|everything|all of it)\b")


def refunds_all(reading: Reading) -> bool:
    """Whether "the lot" / "everything" the question says is what a refund is of ("refund the lot")."""
    return bool(_REFUND_ALL.search(reading.query.lower()))


# "the £139 back", "half her order back", "half back", "a third of it back", "can the full amount go
# back": money asked back, a
# refund whatever the verb.
_PARTS = "|".join(rf"{'[ -]'.join(said.split())}s?" for said in SHARE_WORDS)
_MONEY_BACK = re.compile(
    rf"(?:\d|\bpounds?|\bquid|\blot|\bamount|\border|\btotal|\bprice|\b(?:{_PARTS})"
    r"(?:\s+of\s+(?:it|that|this|them))?)\s+(?:go\s+|come\s+)?back\b"
)


def asks_money_back(reading: Reading) -> bool:
    """Whether the question asks an amount or an order's money back ("can we give her the £139 back")."""
    return bool(_MONEY_BACK.search(reading.query.lower()))


# "her three most recent tickets": a count the question states, passed as the search's limit (the
# orders and tickets searches give the newest first).
# The counts a question states of its newest records, in words ("three most recent"): two to ten.
_COUNTS = {word: count for word, count in COUNT_WORDS.items() if 2 <= count <= 10}
_NEWEST = re.compile(
    rf"\b(?P<count>\d{{1,2}}|{'|'.join(_COUNTS)}) (?:most recent|latest|last|newest) "
    r"(?P<what>tickets|orders)\b"
)


def newest(reading: Reading) -> dict[str, int]:
    """The searches the question limits to its newest records, and how many ("three most recent
    tickets" -> {"tickets.search_tickets": 3})."""
    limits: dict[str, int] = {}
    for said in _NEWEST.finditer(reading.query.lower()):
        count = (
            _COUNTS.get(said["count"]) or int(said["count"])
            if said["count"].isdigit()
            else _COUNTS[said["count"]]
        )
        limits[f"{said['what']}.search_{said['what']}"] = count
    return limits


def on_the_order(reading: Reading) -> bool:
    """Whether the question asks of an order it points at, not of the customer ("any tickets on it")."""
    return bool(_ON_THE_ORDER.search(reading.query.lower()))


def second_ask_at(reading: Reading) -> int:
    """Where the question's conditional second ask starts ("... if not, what about a third?"), or its end."""
    text = reading.query.lower()
    conditional = _CONDITIONAL.search(text)
    if conditional is None:
        return len(text)
    alternative = _ALTERNATIVE.search(text, conditional.start())
    return alternative.start() if alternative else conditional.end()


def follow_up(ask: str, after: str, reading: Reading, amounts: Sequence[Any], order: str = "") -> FollowUp:
    """The follow-up of ``ask`` ("refund", "tickets") about the order ``reading`` points at among the
    ones the orders search ``after`` finds, or about ``order``, which the lookup ``after`` gives ("half
    back on ORD-10023": a share of its total); ``amounts``: the amount mentions the question names
    without an order (those after a conditional are the second check's)."""
    text = reading.query.lower()
    split = second_ask_at(reading)
    first = [a.value for a in amounts if a.start < split]
    second = [a.value for a in amounts if a.start >= split]
    return FollowUp(
        ask,
        after,
        amount=first[0] if len(first) == 1 else None,
        share=1.0
        if reading.full_amount and reading.full_amount.lower() in text[:split]
        else share_said(text[:split]),
        words=tuple(
            dict.fromkeys(
                singular(w)
                for w in reading.topic
                if PRODUCT_WORDS & {w, singular(w)} and w not in ANY_ITEM_WORDS
            )
        ),
        totals=tuple(first),
        status=next((status for said, status in _STATUSES if said.search(text)), None),
        latest=bool(_LATEST.search(text)),
        each=bool(_EACH.search(text)),
        dated=bool(reading.of("dates")),
        fallback_amount=second[0] if second else None,
        fallback_share=share_said(text[split:]) if split < len(text) else None,
        depth=next(iter(reading.values("links")), None) if ask == "related" else None,
        order=order,
    )


def fallback_of(
    check: str, order: str, amount: Any, reading: Reading, amounts: Sequence[Any]
) -> FollowUp | None:
    """The second check the question makes conditional on the check ``check`` of ``amount`` on
    ``order`` ("failing that, half of it?"), or None; ``amounts``: the amount mentions left unpaired."""
    split = second_ask_at(reading)
    if split >= len(reading.query):
        return None
    second = [a.value for a in amounts if a.start >= split]
    share = share_said(reading.query.lower()[split:])
    if not second and share is None:
        return None
    if second:
        return FollowUp("fallback", check, amount=second[0], order=order)
    return FollowUp("fallback", check, amount=amount, share=share, order=order)


_AWAITING = "a later round places it from what the earlier ones find (the order or article meant, or billing's answer to a first check)"


def awaiting(amount: str) -> Unplanned:
    """An amount a follow-up places, listed until the round that places it: no plan drops it."""
    return Unplanned(f"the amount {amount}", _AWAITING, "nothing: the next round places it")


def awaiting_links(said: str) -> Unplanned:
    """A count of links a related follow-up passes as its depth ("two hops"), listed until then."""
    return Unplanned(f"'{said}'", _AWAITING, "nothing: the next round places it")


def next_round(
    plan: Plan, findings: Mapping[str, Sequence[Any]], refused: Collection[str] = ()
) -> Plan | None:
    """``plan`` grown by the tasks its follow-ups' findings justify, or None when it has none left.

    ``findings``: each task's records, by task id (a task that failed or found nothing has none);
    ``refused``: the tasks billing refused (a refund check's "no", which a fallback follows).
    """
    if not plan.follow_ups or plan.rounds >= MAX_ROUNDS:
        return None
    tasks = list(plan.tasks.values())
    unplanned = [item for item in plan.unplanned if item.why != _AWAITING]  # placed now, or not needed
    later: list[FollowUp] = []
    for follow_up in plan.follow_ups:
        if follow_up.ask == "related":
            added = _related(follow_up, findings.get(follow_up.after, ()), taken={t.id for t in tasks})
            if isinstance(added, PlannedTask):
                tasks.append(added)
            else:
                unplanned.append(added)
            continue
        if follow_up.ask == "fallback":
            if follow_up.after in refused:
                tasks.append(_fallback(follow_up, plan.tasks[follow_up.after], taken={t.id for t in tasks}))
            continue
        orders = [r for r in findings.get(follow_up.after, ()) if isinstance(r, dict) and "id" in r]
        if not orders:
            unplanned.append(Unplanned(
                _asked(follow_up), f"no order of the customer was found ({follow_up.after} found none)",
                "name the order, e.g. 'refund £45 on ORD-10031'",
            ))  # fmt: skip
            continue
        chosen, how = _select(follow_up, orders)
        unplanned += _amounts_unused(follow_up, chosen)
        if not chosen or len(chosen) > (MOST_CHOSEN if follow_up.each else 1):
            unplanned.append(_candidates(follow_up, chosen or orders, how, matched=bool(chosen)))
            continue
        if follow_up.ask == "order":
            continue  # the order meant is among the findings already: nothing more to research
        for order in chosen:
            added = _task_for(follow_up, order, how, taken={task.id for task in tasks})
            if isinstance(added, Unplanned):
                unplanned.append(added)
                continue
            tasks.append(added)
            second = _second(follow_up, added)
            if second is not None:
                later.append(second)
    unplanned += [awaiting(pounds(amount)) for f in later for amount in f.amounts_placed]
    offered: dict[str, set[str]] = {source: set(tools) for source, tools in TOOLS.items()}
    for task in tasks:  # a registered source's tasks stay as the first round checked them
        offered.setdefault(task.source, set()).add(task.tool)
    return plan.rebuilt(
        tasks, tuple(unplanned), offered=offered, follow_ups=tuple(later), rounds=plan.rounds + 1
    )


def _amounts_unused(follow_up: FollowUp, chosen: list[dict[str, Any]]) -> list[Unplanned]:
    """The amounts a tickets follow-up awaited as an order's total that no order chosen has: the
    question named them for something else (a refund it did not ask as such), as one round lists them."""
    if follow_up.ask == "refund":
        return []
    return [
        Unplanned(
            f"the amount {pounds(total)}",
            "no order was named that it could be refunded on",
            f"name the order, e.g. 'refund {pounds(total)} on ORD-10031'",
        )
        for total in follow_up.totals
        if not any(_number(order.get("total")) == total for order in chosen)
    ]


def _second(follow_up: FollowUp, check: PlannedTask) -> FollowUp | None:
    """The fallback a refund follow-up leaves on the check it added, if the question asks one."""
    if follow_up.ask != "refund":
        return None
    order, amount = str(check.arguments["order_id"]), check.arguments["amount"]
    if follow_up.fallback_amount is not None:
        return FollowUp("fallback", check.id, amount=follow_up.fallback_amount, order=order)
    if follow_up.fallback_share is not None:
        return FollowUp("fallback", check.id, amount=amount, share=follow_up.fallback_share, order=order)
    return None


def _fallback(follow_up: FollowUp, first: PlannedTask, taken: set[str]) -> PlannedTask:
    asked = follow_up.amount if follow_up.amount is not None else 0.0
    amount = round(asked * follow_up.share, 2) if follow_up.share is not None else asked
    said = (
        f"{said_share(follow_up.share)} of {pounds(asked)}"
        if follow_up.share is not None
        else "the amount asked next"
    )
    task = PlannedTask(
        f"refund_eligibility_{_slug(follow_up.order)}", "billing", "refund_eligibility",
        {"order_id": follow_up.order, "amount": amount}, purpose=_REFUND_PURPOSE, depends_on=(),
        why=f"follows {first.id}, refused: the question asks next whether {pounds(amount)} ({said}) may be refunded",
        follows=f"{first.id}:refused",
    )  # fmt: skip
    return _unique(task, taken)


def _related(follow_up: FollowUp, found: Sequence[Any], taken: set[str]) -> PlannedTask | Unplanned:
    """The links of the article a policy search found first: the search ranks its best match first,
    and that is the article the question means ("the returns policy and whatever it points to")."""
    articles = [str(r["id"]) for r in found if isinstance(r, dict) and "id" in r]
    if not articles:
        return Unplanned(
            "the articles linked to the one asked about",
            f"no policy article was found ({follow_up.after} found none)",
            "name the article, e.g. 'articles linked to KB-RETURNS'",
        )
    depth = {"depth": follow_up.depth} if follow_up.depth else {}
    task = PlannedTask(
        f"related_policies_{_slug(articles[0])}", "kb", "related_policies", {"article_id": articles[0], **depth},
        depends_on=(follow_up.after,), follows=f"{follow_up.after}:{articles[0]}",
        why=f"follows {articles[0]}, the best match of {follow_up.after}: the article meant; the articles "
        "linked to it were asked" + (f", up to {follow_up.depth} links away" if follow_up.depth else ""),
    )  # fmt: skip
    return _unique(task, taken)


def _select(follow_up: FollowUp, orders: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The orders the question picks among ``orders``, and how it picked them, in words."""
    if follow_up.order:
        return [o for o in orders if o["id"] == follow_up.order], "it is the order the question names"
    chosen, said = list(orders), ["it was placed in the dates asked"] if follow_up.dated else []
    if follow_up.totals:
        by_total = [o for o in chosen if _number(o.get("total")) in follow_up.totals]
        if by_total:
            chosen = by_total
            said.append(f"its total is {' or '.join(pounds(t) for t in follow_up.totals)}")
    if follow_up.status:
        by_status = [o for o in chosen if o.get("status") == follow_up.status]
        said.append(f"it is {follow_up.status.replace('_', ' ')}")
        chosen = by_status
    if follow_up.words:
        scores = {o["id"]: len(_held(o) & set(follow_up.words)) for o in chosen}
        best = max(scores.values(), default=0)
        chosen = [o for o in chosen if best and scores[o["id"]] == best]
        matched = sorted(_held(chosen[0]) & set(follow_up.words)) if chosen else follow_up.words
        said.append(f"its items match '{' '.join(matched)}'")
    if follow_up.latest and chosen:
        last = max(str(o.get("placed_on", "")) for o in chosen)
        chosen = [o for o in chosen if str(o.get("placed_on", "")) == last]
        said.append(f"it is the latest (placed on {last})")
    if not said and len(chosen) > 1 and not follow_up.each:
        return [], "nothing in the question tells the customer's orders apart"
    if not chosen:
        return [], f"none of the customer's orders matches ({' and '.join(said)})"
    return chosen, " and ".join(said) or "it is the customer's only order"


def _held(order: Mapping[str, Any]) -> set[str]:
    """The words of what an order holds, each also without its plural ending ("grinders" -> "grinder")."""
    text = " ".join(
        str(item.get("description", "")) for item in order.get("items") or [] if isinstance(item, dict)
    )
    words = set(re.findall(r"[a-z]+", text.lower()))
    return words | {singular(word) for word in words}


def singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _task_for(
    follow_up: FollowUp, order: dict[str, Any], how: str, taken: set[str]
) -> PlannedTask | Unplanned:
    order_id = str(order["id"])
    follows = f"{follow_up.after}:{order_id}"
    found = f"follows {order_id}, found by {follow_up.after}: the order meant, as {how}"
    slug = _slug(order_id)
    if follow_up.ask == "tickets":
        task = PlannedTask(
            f"search_tickets_{slug}", "tickets", "search_tickets", {"order_id": order_id},
            depends_on=(follow_up.after,), why=f"{found}; its tickets were asked for", follows=follows,
        )  # fmt: skip
        return _unique(task, taken)
    total = _number(order.get("total"))
    if follow_up.share is not None and total is not None:
        amount = round(total * follow_up.share, 2)
        said = (
            "its total"
            if follow_up.share == 1
            else f"{said_share(follow_up.share)} of its total {pounds(total)}"
        )
    elif follow_up.amount is not None:
        amount, said = follow_up.amount, "the amount asked"
    else:
        return Unplanned(
            f"a refund on {order_id}",
            f"no amount was given for it ({how})",
            f"say how much, e.g. 'refund £45 on {order_id}'",
        )
    task = PlannedTask(
        f"refund_eligibility_{slug}", "billing", "refund_eligibility", {"order_id": order_id, "amount": amount},
        purpose=_REFUND_PURPOSE, depends_on=(follow_up.after,),
        why=f"{found}; whether {pounds(amount)} ({said}) may be refunded on it", follows=follows,
    )  # fmt: skip
    return _unique(task, taken)


def _slug(order_id: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", order_id.lower())


def _unique(task: PlannedTask, taken: set[str]) -> PlannedTask:
    name = task.id
    while name in taken:
        name += "_"
    return replace(task, id=name)


def _asked(follow_up: FollowUp) -> str:
    return {"refund": "the order the refund is about", "tickets": "the order the tickets are about"}.get(
        follow_up.ask, "the order meant"
    )


def _candidates(follow_up: FollowUp, orders: list[dict[str, Any]], how: str, *, matched: bool) -> Unplanned:
    listed = ", ".join(
        f"{o['id']} ({pounds(_number(o.get('total')) or 0)}, {o.get('status', '?')}, placed {o.get('placed_on', '?')})"
        for o in orders[:10]
    )
    too_many = f"more than the {MOST_CHOSEN} one question researches" if follow_up.each else None
    why = (
        f"{len(orders)} orders match ({how}), {too_many or 'so which is meant is ambiguous'}: {listed}"
        if matched
        else f"{how}: {listed}"
    )
    example = "tickets on ORD-10031" if follow_up.ask == "tickets" else "refund £45 on ORD-10031"
    return Unplanned(_asked(follow_up), why, f"name the order meant, e.g. '{example}'")
