"""Every outcome each source can produce, as (tool, arguments, scopes, expected) rows.

``expected`` is "ok" (results), "empty" (a valid empty result), or an error category. The same rows
are played in memory, over stdio and over streamable HTTP.
"""

from __future__ import annotations

from typing import Any

Outcome = tuple[str, dict[str, Any], tuple[str, ...], str]

OUTCOMES: dict[str, list[Outcome]] = {
    "customers": [
        ("customer_lookup", {"identifier": "jane.doe@example.com"}, (), "ok"),
        ("customer_lookup", {"identifier": "nobody@example.com"}, (), "empty"),
        ("customer_lookup", {"identifier": "Jane.Doe@Example.com "}, (), "validation"),
        ("customer_lookup", {"identifier": "CUST-00013"}, (), "business"),
        ("customer_lookup", {"identifier": "CUST-00001"}, (), "permission"),
        ("customer_lookup", {"identifier": "CUST-00001"}, ("customers:restricted",), "ok"),
        ("customer_lookup", {"identifier": "CUST-00042", "mode": "success"}, (), "ok"),
        ("customer_lookup", {"identifier": "CUST-00042", "mode": "not_found"}, (), "empty"),
        ("customer_lookup", {"identifier": "CUST-00042", "mode": "timeout"}, (), "transient"),
        ("customer_lookup", {"identifier": "CUST-00042", "mode": "invalid"}, (), "validation"),
        ("customer_lookup", {"identifier": "CUST-00042", "mode": "business"}, (), "business"),
        ("customer_lookup", {"identifier": "CUST-00042", "mode": "permission"}, (), "permission"),
        ("customer_lookup", {"identifier": "jane.doe@exmaple.com"}, (), "empty"),  # a suggestion, no record
        ("find_customers", {"name": "Jane Doe"}, (), "ok"),
        ("find_customers", {"name": "Zebedee Quux"}, (), "empty"),
        ("find_customers", {"name": "jane.doe@example.com"}, (), "validation"),
        ("find_customers", {"name": "Victoria"}, (), "permission"),
        ("find_customers", {"name": "Victoria"}, ("customers:restricted",), "ok"),
    ],
    "orders": [
        ("search_orders", {"customer_id": "CUST-00042"}, (), "ok"),
        ("search_orders", {"customer_id": "CUST-00077"}, (), "empty"),
        ("search_orders", {"customer_id": "CUST-00042", "sku": "sku-4417-blk"}, (), "validation"),
        (
            "search_orders",
            {"customer_id": "CUST-00042", "placed_after": "2026-11-01", "placed_before": "2026-01-01"},
            (),
            "validation",
        ),
        ("get_order", {"order_id": "ORD-10023"}, (), "ok"),
        ("get_order", {"order_id": "ORD-99999"}, (), "empty"),
        ("get_order", {"order_id": "ord-10023"}, (), "validation"),
    ],
    "billing": [
        ("list_invoices", {"customer_id": "CUST-00042"}, (), "permission"),
        ("list_invoices", {"customer_id": "CUST-00042"}, ("billing:read",), "ok"),
        ("list_invoices", {"customer_id": "CUST-00077"}, ("billing:read",), "empty"),
        ("refund_eligibility", {"order_id": "ORD-10031", "amount": 45}, ("billing:read",), "ok"),
        ("refund_eligibility", {"order_id": "ORD-10023", "amount": 750}, ("billing:read",), "business"),
        ("refund_eligibility", {"order_id": "ORD-10023", "amount": 7.505}, ("billing:read",), "validation"),
        (
            "issue_refund",
            {"order_id": "ORD-10023", "amount": 750, "idempotency_key": "outcome-over-limit"},
            ("billing:refund",),
            "business",
        ),
    ],
    "tickets": [
        ("search_tickets", {"query": "damaged espresso", "customer_id": "CUST-00042"}, (), "ok"),
        ("search_tickets", {"customer_id": "CUST-00077"}, (), "empty"),
        ("search_tickets", {"query": "refund", "customer_id": "cust-42"}, (), "validation"),
        ("search_tickets", {"order_id": "ORD-10023"}, (), "ok"),
        # The rate limit: a burst of four calls, then refusal (a call the argument guard refuses costs nothing).
        ("search_tickets", {"query": "refund"}, (), "ok"),
        ("search_tickets", {"query": "refund"}, (), "transient"),
    ],
    "kb": [
        ("search_policies", {"query": "damaged items refund"}, (), "ok"),
        ("search_policies", {"query": "zeppelin"}, (), "empty"),
        ("related_policies", {"article_id": "KB-DAMAGED"}, (), "ok"),
        ("related_policies", {"article_id": "kb-damaged"}, (), "validation"),
        ("related_policies", {"article_id": "KB-NOWHERE"}, (), "empty"),
    ],
}

# Settings under which the rows above hold, for a source started as a process.
PROCESS_ENVIRONMENT: dict[str, dict[str, str]] = {
    "tickets": {"RESEARCH_TICKETS_RATE": "0.001", "RESEARCH_TICKETS_BURST": "4"},
}

VALID_CALLS: dict[str, dict[str, Any]] = {
    "customer_lookup": {"identifier": "CUST-00042"},
    "find_customers": {"name": "Jane Doe"},
    "search_orders": {"customer_id": "CUST-00042"},
    "get_order": {"order_id": "ORD-10023"},
    "list_invoices": {"customer_id": "CUST-00042"},
    "refund_eligibility": {"order_id": "ORD-10031", "amount": 45},
    "issue_refund": {"order_id": "ORD-10031", "amount": 45, "idempotency_key": "valid-call-0001"},
    "search_tickets": {"query": "refund"},
    "search_policies": {"query": "refund"},
    "related_policies": {"article_id": "KB-REFUNDS"},
}
