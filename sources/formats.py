"""The argument formats the sources accept, each with its pattern, a plain description and an example.

A format is declared once and serves three readers: the tool's published input schema (pattern,
description, examples), the argument guard that turns a mismatch into a validation error naming the
field, the expected form and an example, and a tool body that finds a deeper problem (a date that
matches the pattern but does not exist) and reports it in the same words.

The identifiers' formats (customer and order ids, SKUs, article ids, emails) are built from
``sources.identifiers``, where each identifier's prefix, shape and spellings are stated once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from sources import identifiers
from sources.deferred import deferred

if TYPE_CHECKING:
    import pydantic
else:
    pydantic = deferred("pydantic")  # loaded by the first Field: see AMOUNT below

__all__ = [
    "AMOUNT",  # noqa: F822  (built on first use: see __getattr__)
    "ARGUMENT_FORMS",
    "ARTICLE_ID",
    "CURSOR",
    "CUSTOMER_ID",
    "CUSTOMER_IDENTIFIER",
    "DATE_RANGES",
    "IDEMPOTENCY_KEY",
    "ISO_DATE",
    "ORDER_ID",
    "PERSON_NAME",
    "SEARCH_TEXT",
    "SKU",
    "CustomerTier",
    "Format",
    "InvoiceStatus",
    "LookupMode",
    "OrderStatus",
    "TicketPriority",
    "TicketStatus",
    "one_of",
    "whole_number",
]


@dataclass(frozen=True)
class Format:
    """A string format: what the schema enforces and what an error message says about it."""

    pattern: str
    description: str
    example: str
    max_length: int

    def field(self, summary: str | None = None, **constraints: Any) -> Any:
        """A pydantic ``Field`` publishing this format in a tool's input schema."""
        description = f"{summary} {self.expected}" if summary else self.expected
        return pydantic.Field(
            description=description,
            examples=[self.example],
            pattern=self.pattern,
            max_length=self.max_length,
            **constraints,
        )

    @property
    def expected(self) -> str:
        """The sentence an error message and the schema use for this format."""
        return f"Expected: {self.description}."


def _published(identifier: identifiers.NumberedId | identifiers.Sku | identifiers.ArticleId) -> Format:
    """The format of a value that is one identifier, exactly as ``sources.identifiers`` spells it."""
    return Format(
        f"^{identifier.pattern}$", identifier.description, identifier.example, identifier.max_length
    )


CUSTOMER_ID = _published(identifiers.CUSTOMER_ID)
CUSTOMER_IDENTIFIER = Format(
    pattern=f"^({identifiers.CUSTOMER_ID.pattern}|{identifiers.EMAIL.pattern})$",
    description=(
        f"{identifiers.EMAIL.description} or {identifiers.CUSTOMER_ID.name} ({identifiers.CUSTOMER_ID.shape})"
    ),
    example=identifiers.EMAIL.example,
    max_length=identifiers.EMAIL.max_length,
)
ORDER_ID = _published(identifiers.ORDER_ID)
PERSON_NAME = Format(
    pattern=r"^[A-Za-z .'-]*[A-Za-z][A-Za-z .'-]*$",
    description="a person's name: letters A-Z, spaces, hyphens, apostrophes and dots, at least one letter",
    example="Jane Doe",
    max_length=100,
)
SKU = _published(identifiers.SKU)
ISO_DATE = Format(
    pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
    description="a calendar date in ISO form YYYY-MM-DD",
    example="2026-10-01",
    max_length=10,
)
SEARCH_TEXT = Format(
    pattern=r"^[\s\S]*[A-Za-z0-9][\s\S]*$",
    description="free text of at most 500 characters containing at least one letter or digit",
    example="damaged item refund",
    max_length=500,
)
ARTICLE_ID = _published(identifiers.ARTICLE_ID)
IDEMPOTENCY_KEY = Format(
    pattern=r"^[A-Za-z0-9_-]{8,64}$",
    description="8 to 64 letters, digits, hyphens or underscores, unique to this refund",
    example="refund-ORD-10031-01",
    max_length=64,
)
CURSOR = Format(
    pattern=r"^[0-9]{1,9}$",
    description="the nextCursor value of a previous page",
    example="50",
    max_length=9,
)

# The form each argument takes, by the name every tool gives it ("kb refunds" as search text is no article
# id): ``subagents.repair`` reads a refused value as the first whose spelling matches, else only trims it.
ARGUMENT_FORMS: dict[str, Format | tuple[identifiers.Spelled, ...]] = {
    "identifier": (identifiers.EMAIL, identifiers.CUSTOMER_ID),
    "customer_id": (identifiers.CUSTOMER_ID,),
    "order_id": (identifiers.ORDER_ID,),
    "sku": (identifiers.SKU,),
    "article_id": (identifiers.ARTICLE_ID,),
    "placed_after": ISO_DATE,
    "placed_before": ISO_DATE,
}
DATE_RANGES = (("placed_after", "placed_before"),)  # date bounds, (from, to): given reversed, swapped


def whole_number(summary: str, low: int, high: int, example: int) -> Any:
    """A pydantic ``Field`` for a bounded whole number, described the way formats are."""
    return pydantic.Field(
        description=f"{summary} Expected: a whole number from {low} to {high}.",
        examples=[example],
        ge=low,
        le=high,
    )


def one_of(summary: str, choices: type[StrEnum], example: StrEnum) -> Any:
    """A pydantic ``Field`` for a choice among an enum's values, described the way formats are."""
    names = ", ".join(choice.value for choice in choices)
    return pydantic.Field(description=f"{summary} Expected: one of {names}.", examples=[example.value])


# What a count of links says of itself: the planner reads "two hops out" into the argument that says it.
LINKS_DESCRIPTION = "How many links away to look."

AMOUNT_DESCRIPTION = (
    "an amount in pounds sterling (GBP), greater than 0 and at most 100000, with at most two decimals"
)


def __getattr__(name: str) -> Any:
    """``AMOUNT``, the one format that is a pydantic type, built when a source first asks for it.

    The planner reads these formats in every command, a usage error's included, and needs none of
    pydantic (a tenth of a second to import); only the sources' schemas do.
    """
    if name == "AMOUNT":
        return Annotated[
            float,
            pydantic.Field(description=f"Expected: {AMOUNT_DESCRIPTION}.", examples=[45.0], gt=0, le=100_000),
        ]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class LookupMode(StrEnum):
    """``customer_lookup``'s outcome simulation, exactly as in the reference exercise."""

    SUCCESS = "success"
    NOT_FOUND = "not_found"
    TIMEOUT = "timeout"
    INVALID = "invalid"
    BUSINESS = "business"
    PERMISSION = "permission"


class TicketStatus(StrEnum):
    OPEN = "open"
    PENDING = "pending"
    CLOSED = "closed"


# The values a record's field takes, published as enums in the tools' output schemas: what a question
# may ask of a record ("is ORD-10013 cancelled?", "is she a gold customer?") is read from them.
class TicketPriority(StrEnum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"


class OrderStatus(StrEnum):
    PROCESSING = "processing"
    SHIPPED = "shipped"
    DELIVERED = "delivered"
    DELIVERED_DAMAGED = "delivered_damaged"
    RETURNED = "returned"
    CANCELLED = "cancelled"


class CustomerTier(StrEnum):
    STANDARD = "standard"
    GOLD = "gold"
    VIP = "vip"


class InvoiceStatus(StrEnum):
    PAID = "paid"
    VOID = "void"
