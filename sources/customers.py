"""The customers source (CRM): ``customer_lookup``, exactly as in the reference exercise.

Natural failures: a malformed identifier is a validation error; an unknown customer is a valid empty
result; an erased (GDPR) record is refused by a business rule; a restricted (VIP) record needs scope
``customers:restricted``. ``mode`` simulates each outcome on demand; ``success`` does a real lookup.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from pydantic import BaseModel

from sources.auth import require_scope
from sources.contract import EmptyResult, ErrorCategory, ResultPage, ToolError, ToolFailure
from sources.formats import CUSTOMER_IDENTIFIER, LookupMode, one_of
from sources.settings import SourceSettings
from sources.toolkit import open_source, page_of
from sources.wire import Wire

__all__ = ["Customer", "create_server"]


class Customer(BaseModel):
    id: str
    email: str
    name: str
    tier: str
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
                f"Invalid identifier format: {identifier}. Expected email (user@domain.com) or ID (CUST-NNNNN). "
                "Correct the format and call again.",
            )
        case LookupMode.BUSINESS:
            return ToolError.of(
                ErrorCategory.BUSINESS,
                "Refund of £750 exceeds the £500 automatic limit. Escalate to a manager with refund details.",
            )
        case _:
            return ToolError.of(
                ErrorCategory.PERMISSION,
                "Current service account lacks access to financial records. Escalate to a senior agent.",
            )


def create_server(settings: SourceSettings | None = None, *, wire: Wire | None = None) -> MCPServer:
    source = open_source(
        "customers",
        settings,
        wire=wire,
        instructions="Customer records (CRM). Look customers up by email or CUST-NNNNN id.",
    )

    @source.tool(Customer)
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
        matches. Errors follow the contract: a malformed identifier is `validation`; an erased
        customer is `business` (never retry); a restricted customer needs scope
        customers:restricted (`permission`). `mode` simulates each outcome on demand.
        """
        if mode is not LookupMode.SUCCESS:
            return _simulated(mode, identifier)
        column = "id" if identifier.startswith("CUST-") else "email"
        row = source.store.row(f"SELECT * FROM customers WHERE {column} = ?", (identifier,))  # noqa: S608  (column is one of two literals)
        if row is None:
            return page_of(
                [],
                empty_message=f"No customer matches {identifier}.",
            )
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

    return source.server


if __name__ == "__main__":
    from sources.serve import main

    main(create_server)
