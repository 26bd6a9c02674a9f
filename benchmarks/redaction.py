"""Redaction's cost per span text: ``traces.redact.for_trace`` on what a query's spans carry.

It runs on every span's query, arguments, decision reasons and status message, so its cost is paid per
span. The texts: the story query (an email), the issue's query (a name, a phone and a card number), a
task's arguments, a recovery reason, and a long ticket-like text.

    .venv/bin/python benchmarks/redaction.py [--rounds 2000]

Prints the median microseconds per call for each text.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traces.redact import for_trace  # noqa: E402

TEXTS = {
    "story query": "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund "
    "on ORD-10023 is allowed",
    "issue query": "who is Jane Doe, and what tickets does CUST-00042 have? phone +44 7700 900123, "
    "card 4111 1111 1111 1111",
    "arguments": {"customer_id": "CUST-00042", "placed_after": "2026-10-01", "limit": 50},
    "reason": "transient: tickets rate limited; retry after 1200 ms (attempt 2 of 4)",
    "ticket body": "Order ORD-10023 arrived damaged. " * 40,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
    for name, value in TEXTS.items():
        for_trace(value)  # warm: compiled patterns, a lazy import
        timings = []
        for _ in range(rounds):
            started = time.perf_counter()
            for_trace(value)
            timings.append(time.perf_counter() - started)
        print(f"{name:12} median {statistics.median(timings) * 1e6:7.1f} µs per call")


if __name__ == "__main__":
    main()
