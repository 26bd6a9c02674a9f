"""How large one answer of a source may be, and how a larger one is reported.

A source that answers 50 MB (or a million records) would otherwise be read whole by the client before
anything could refuse it: 430 to 470 MB in the coordinator until the deadline, then "TimeoutError".
The sessions' transports (``subagents.sessions.bounded``) read every message against this bound
*while it arrives*: a stdio line over it is drained and discarded, never kept; over HTTP an SSE
event or a JSON body over it is cut off. The pending call then fails with a JSON-RPC error of
``ANSWER_TOO_LARGE``, which ``subagents.classify`` maps into the contract; the session stays open
for the next call.

Its category is ``validation``, not retryable: the same call would answer the same size, so a retry
would only read (and drop) it again; what helps is asking for less (a narrower query, a smaller
``limit``), which is what "fix input" says. The bound sits far above any answer of the demo sources
(the oversized fault adds 2 MB) and far below what a client can hold without trouble.
"""

from __future__ import annotations

__all__ = ["ANSWER_TOO_LARGE", "MAX_ANSWER_BYTES", "too_large"]

MAX_ANSWER_BYTES = 8 * 2**20

# A client-side JSON-RPC code of our own, as the SDK's own -32000 (connection closed) and -32001
# (timeout) are: the answer was refused here, the source never sent an error.
ANSWER_TOO_LARGE = -32050


def too_large(limit: int) -> str:
    """The gap's words: the limit in MB, as a person reads it."""
    return f"the answer was larger than {limit / 2**20:g} MB"
