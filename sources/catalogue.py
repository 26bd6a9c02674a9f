"""What the five sources offer and where a fleet of them listens: the facts a planner and a fleet share.

A test checks this catalogue against what each server answers to ``tools/list``, so it cannot drift.
"""

from __future__ import annotations

__all__ = ["DEFAULT_PORTS", "SOURCES", "TOOLS", "default_url"]

SOURCES = ("customers", "orders", "billing", "tickets", "kb")

TOOLS: dict[str, frozenset[str]] = {
    "customers": frozenset({"customer_lookup"}),
    "orders": frozenset({"search_orders"}),
    "billing": frozenset({"list_invoices", "refund_eligibility", "issue_refund"}),
    "tickets": frozenset({"search_tickets"}),
    "kb": frozenset({"search_policies", "related_policies"}),
}

# Where `research sources up` starts each source over HTTP, and where `--transport http` looks.
DEFAULT_PORTS = {"customers": 8101, "orders": 8102, "billing": 8103, "tickets": 8104, "kb": 8105}


def default_url(source: str) -> str:
    return f"http://127.0.0.1:{DEFAULT_PORTS[source]}/mcp"
