"""The customers source (CRM): ``customer_lookup`` as in the reference exercise, and ``find_customers``.

Natural failures: a malformed identifier or name is a validation error; an unknown customer is a valid
empty result (for an email one edit or two away from exactly one known email, its message suggests that
email, and returns no record); an erased (GDPR) record is refused by a business rule and never matches a
name search; a restricted (VIP) record needs scope ``customers:restricted``, in a lookup and whenever
it is among a name search's matches. ``mode`` simulates each lookup outcome on demand; ``success``
does a real lookup.
"""

from __future__ import annotations

import re
import string
from collections import defaultdict
from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import BaseModel
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError, ToolFailure
from sources.domain import AUTOMATIC_REFUND_LIMIT, pounds
from sources.formats import CUSTOMER_IDENTIFIER, PERSON_NAME, CustomerTier, LookupMode, one_of, whole_number
from sources.identifiers import CUSTOMER_ID
from sources.security.auth import require_scope
from sources.settings import SourceSettings
from sources.store import Store
from sources.toolkit import open_source, page_of
from sources.wire import Wire

__all__ = ["Customer", "create_server"]

_NEAR_MISS_EDITS = 2  # how many typed characters an email may be off and still get a suggestion


class Customer(BaseModel):
    id: str
    email: str
    name: str
    tier: CustomerTier
    country: str
    created_on: str


def _simulated(mode: LookupMode, identifier: str) -> ToolError | EmptyResult:
    """The reference exercise's outcomes: each error carries exactly errorCategory, isRetryable, description."""
    match mode:
        case LookupMode.NOT_FOUND:
            return EmptyResult(
                message=f"No customer found matching {identifier}. "
                "The query executed successfully but returned no matches."
            )
        case LookupMode.TIMEOUT:
            return ToolError.of(
                ErrorCategory.TRANSIENT,
                "Customer database timed out after 5 seconds. The request is valid and should succeed on retry.",
            )
        case LookupMode.INVALID:
            return ToolError.of(
                ErrorCategory.VALIDATION,
                f"Invalid identifier format: {identifier}. "
                f"Expected email (user@domain.com) or ID ({CUSTOMER_ID.shape}). "
                "Correct the format and call again.",
            )
        case LookupMode.BUSINESS:
            return ToolError.of(
                ErrorCategory.BUSINESS,
                f"Refund of £750 exceeds the {pounds(AUTOMATIC_REFUND_LIMIT, short=True)} automatic limit. "
                "Escalate to a manager with refund details.",
            )
        case _:
            return ToolError.of(
                ErrorCategory.PERMISSION,
                "Current service account lacks access to financial records. Escalate to a senior agent.",
            )


def _near_miss(store: Store, email: str) -> str | None:
    """The one email a few edits from ``email``, or None when there is none or more than one.

    Only emails that may be shown are candidates: never an erased or a restricted customer's.
    """
    shown = store.rows("SELECT email FROM customers WHERE erased_on IS NULL AND NOT restricted")
    near = process.extract(
        email,
        [row["email"] for row in shown],
        scorer=Levenshtein.distance,
        score_cutoff=_NEAR_MISS_EDITS,
        limit=2,
    )
    return near[0][0] if len(near) == 1 else None


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class _NameIndex:
    """The names of the customers a name search may return, held in memory as every start of every
    word of each: a search word is one look-up, where SQL's ``LIKE`` on ``' ' || replace(name, '-', ' ')``
    computed both for every row of the table on every call (0.25 ms of a 1.8 ms call), and a scan of
    the names in memory still read each (8 us in a loop for 400 names, three to four times that in a
    serving source). It matches as that ``LIKE`` did: a word starts after a space or a hyphen, and
    only ASCII letters ignore their case (SQLite's ``LIKE``); a search word holds no space, so it
    follows a space in a name exactly when it starts one of its words.

    Loaded once: no tool writes the customers table, and a world's files are never replaced
    (``sources.world``), so the index cannot go stale.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        shown = store.rows("SELECT id, name FROM customers WHERE erased_on IS NULL ORDER BY name, id")
        self._ids = [row["id"] for row in shown]
        # Each start of a word -> the places (in name, then id, order) of the names it starts a word of.
        self._starts: dict[str, set[int]] = defaultdict(set)
        for place, row in enumerate(shown):
            for word in _words_of(row["name"]).split(" "):
                for end in range(1, len(word) + 1):
                    self._starts[word[:end]].add(place)

    def matching(self, words: list[str], most: int) -> list[dict[str, Any]]:
        """The first ``most`` customers, by name then id, a word of whose name each of ``words`` starts."""
        places: set[int] | None = None  # every name, until a word narrows them
        for word in words:
            starting = self._starts.get(word.translate(_ASCII_LOWER), set())
            places = starting if places is None else starting & places
        chosen = range(len(self._ids)) if places is None else sorted(places)
        ids = [self._ids[place] for place in chosen[:most]]
        marks = ", ".join("?" * len(ids))
        return self._store.rows(
            f"SELECT * FROM customers WHERE id IN ({marks}) ORDER BY name, id",  # noqa: S608  (marks are literals; values are parameters)
            ids,
        )


def _words_of(name: str) -> str:
    """A name as the index reads it: a space before each word, ASCII letters in lower case."""
    return " " + name.replace("-", " ").translate(_ASCII_LOWER)


def create_server(settings: SourceSettings | None = None, *, wire: Wire | None = None) -> MCPServer:
    source = open_source(
        "customers",
        settings,
        wire=wire,
        instructions="Customer records (CRM). Look customers up by email or CUST-NNNNN id, or find them by name.",
    )

    names = _NameIndex(source.store)

    @source.tool(Customer, title="Look up a customer")
    def customer_lookup(
        identifier: Annotated[str, CUSTOMER_IDENTIFIER.field("The customer to look up.")],
        mode: Annotated[
            LookupMode,
            one_of(
                "Outcome to simulate; 'success' performs the real lookup.", LookupMode, LookupMode.SUCCESS
            ),
        ] = LookupMode.SUCCESS,
    ) -> ResultPage[Customer] | EmptyResult | ToolError:
        """Look up one customer by email address or customer id (CUST-NNNNN).

        Returns the customer, or a valid empty result (isError false, resultCount 0) when nothing
        matches. When an email is a typo or two away from exactly one customer's email, that empty
        result's message asks "Did you mean ...?"; it returns no record: look the suggested email up
        only if it is plainly the one meant. Errors follow the contract: a malformed identifier is
        `validation`; an erased customer is `business` (never retry); a restricted customer needs
        scope customers:restricted (`permission`). `mode` simulates each outcome on demand.
        """
        if mode is not LookupMode.SUCCESS:
            return _simulated(mode, identifier)
        column = "id" if CUSTOMER_ID.is_canonical(identifier) else "email"
        row = source.store.row(f"SELECT * FROM customers WHERE {column} = ?", (identifier,))  # noqa: S608  (column is one of two literals)
        if row is None:
            suggestion = None if column == "id" else _near_miss(source.store, identifier)
            hint = f" Did you mean {suggestion}?" if suggestion else ""
            return page_of([], empty_message=f"No customer matches {identifier}.{hint}")
        if row["erased_on"]:
            raise ToolFailure(
                ToolError.of(
                    ErrorCategory.BUSINESS,
                    f"Customer {row['id']} was erased on request on {row['erased_on']} (data protection, see KB-GDPR); "
                    "the record cannot be shown or processed. Do not retry; escalate if the case needs it.",
                )
            )
        if row["restricted"]:
            require_scope("customers:restricted", f"restricted customer {row['id']}")
        return page_of([Customer.model_validate(row)], empty_message="")

    @source.tool(Customer, title="Find customers by name")
    def find_customers(
        name: Annotated[
            str, PERSON_NAME.field("The name to search for; each word matches the start of a word of a name.")
        ],
        limit: Annotated[int, whole_number("Most customers returned.", 1, 50, 10)] = 10,
    ) -> ResultPage[Customer] | EmptyResult:
        """Find customers by name, ignoring case: each word given must start a word of the customer's name.

        "jane" finds Jane Doe and Janet Smith; "jane doe" finds Jane Doe only; "doe" finds Jane Doe;
        "ane" finds neither. Customers come ordered by name, then id; when `truncated` is true, more
        customers match than `limit`: give more of the name. No match is a valid empty result
        (isError false, resultCount 0). Erased customers never match. Errors follow the contract: a
        name with characters other than letters, spaces, hyphens, apostrophes and dots is
        `validation`; when a restricted customer is among those it would return, the call needs
        scope customers:restricted (`permission`: request elevation, never retry as is).
        """
        words = [word for word in re.split(r"[\s.-]+", name) if word]
        rows = names.matching(words, limit + 1)
        found = rows[:limit]
        if any(row["restricted"] for row in found):
            require_scope("customers:restricted", f"a restricted customer matching '{name}'")
        return page_of(
            [Customer.model_validate(row) for row in found],
            empty_message=f"No customer has a name matching '{name}'.",
            truncated=len(rows) > limit,
        )

    return source.server


if __name__ == "__main__":
    from sources.processes.serve import main

    main(create_server)
