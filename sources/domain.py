"""The demo world's domain facts that more than one part reads: its calendar, currency, refund rule.

Kept apart from ``sources.world`` (which generates the data with Faker) so that a reader of these
facts, such as the planner, does not pay for importing the generator.
"""

from __future__ import annotations

from datetime import date

__all__ = ["AUTOMATIC_REFUND_LIMIT", "CURRENCY", "CURRENCY_SIGN", "TODAY"]

# The world's calendar is fixed, never the clock: same data, same answers, on every machine and day.
TODAY = date(2026, 11, 1)

# Billing works in pounds sterling only.
CURRENCY = "GBP"
CURRENCY_SIGN = "£"

# KB-REFUNDS: support refunds up to this much of an order automatically, in total over all its
# refunds; beyond it a manager approves. Billing enforces it, the pre-call hook and the chaos checker
# hold to it.
AUTOMATIC_REFUND_LIMIT = 500.0
