"""The demo world's domain facts that more than one part reads: its calendar, currency, refund rule.

Kept apart from ``sources.world`` (which generates the data with Faker) so that a reader of these
facts, such as the planner, does not pay for importing the generator.
"""

from __future__ import annotations

from datetime import date

__all__ = [
    "AUTOMATIC_REFUND_LIMIT",
    "CURRENCY",
    "CURRENCY_SIGN",
    "REFUND_WINDOW_DAYS",
    "TODAY",
    "days_since_delivery",
    "pounds",
    "within_refund_window",
]

# The world's calendar is fixed, never the clock: same data, same answers, on every machine and day.
TODAY = date(2026, 11, 1)

# Billing works in pounds sterling only.
CURRENCY = "GBP"
CURRENCY_SIGN = "£"


def pounds(amount: float, *, short: bool = False) -> str:
    """An amount as every message writes it: £1,250.50, £1,250.00.

    ``short`` drops zero pence, as prose does: £1,250 (the policies' and tools' texts write limits so).
    """
    text = f"{CURRENCY_SIGN}{float(amount):,.2f}"
    return text.removesuffix(".00") if short else text


# KB-REFUNDS: support refunds up to this much of an order automatically, in total over all its
# refunds; beyond it a manager approves. Billing enforces it, the pre-call hook and the chaos checker
# hold to it.
AUTOMATIC_REFUND_LIMIT = 500.0

# KB-REFUNDS: a refund may be issued within this many days of the order's delivery, the last day
# included: delivered on 2 September, refundable up to and including 1 November (60 days later), not
# on 2 November. Later, only a manager may approve one. Billing enforces it, the pre-call hook (from
# what billing told it) and the chaos checker hold to it.
REFUND_WINDOW_DAYS = 60


def days_since_delivery(delivered_on: str | date, today: date) -> int:
    """Whole days from delivery to ``today``: 0 on the day of delivery."""
    delivered = delivered_on if isinstance(delivered_on, date) else date.fromisoformat(delivered_on)
    return (today - delivered).days


def within_refund_window(delivered_on: str | date | None, today: date) -> bool:
    """Whether a refund on ``today`` is within the window of an order delivered on ``delivered_on``.

    An order not delivered yet (``None``) is within it: the window counts from delivery and has not
    started, so it bounds how late a refund may come, never how early (see ``sources.billing``).
    """
    return delivered_on is None or days_since_delivery(delivered_on, today) <= REFUND_WINDOW_DAYS
