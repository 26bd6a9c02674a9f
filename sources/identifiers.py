"""The identifiers the sources take, each described once: its published form, its canonical spelling
and the spellings people type for it.

Every reader and writer of an identifier builds on these facts, so they cannot drift apart:

- ``sources.formats`` publishes each strict ``pattern`` in the tools' input schemas;
- ``sources.world`` numbers the demo world's customers, orders and SKUs with ``canonical``, and
  ``sources.customers`` tells a customer id from an email with ``is_canonical``;
- ``subagents.repair`` rebuilds an argument a source refused from a tolerant spelling
  ("cust 42" -> "CUST-00042");
- ``coordinator.planning.reading`` finds identifiers in a question's free text and canonicalises them.

A pattern here is an unanchored, uncompiled regular expression: each reader anchors it as it needs
(a whole argument, a word in a sentence) and compiles it once. ``pattern`` is the one form the
sources accept. ``spelled`` is the tolerant form, to be matched ignoring case; it puts the parts of
the identifier in groups, from which ``from_match`` builds the canonical form.

``traces.redact`` keeps an email detector of its own on purpose: redaction must catch any
email-shaped text, including addresses the customers tool would refuse (see that module).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "ARTICLE_ID",
    "CUSTOMER_ID",
    "EMAIL",
    "ORDER_ID",
    "SEPARATOR",
    "SKU",
    "ArticleId",
    "Email",
    "NumberedId",
    "Sku",
    "Spelled",
    "names",
]

# What people type between the parts of an identifier: a hyphen, an underscore, a space or nothing.
SEPARATOR = "[-_ ]?"


class Spelled(Protocol):
    """An identifier with a tolerant spelling, and the way back from it to the canonical form."""

    @property
    def spelled(self) -> str: ...
    def from_match(self, match: re.Match[str]) -> str: ...


_IN_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclass(frozen=True)
class NumberedId:
    """An identifier made of a prefix, a hyphen and a fixed number of digits: CUST-00042."""

    name: str  # "a customer id"
    prefix: str  # "CUST"
    digits: int  # how many digits, zero-padded
    nouns: tuple[str, ...]  # the words people write before a bare number: "customer 42", "cx 42"
    example_number: int

    def canonical(self, number: int) -> str:
        """The identifier numbered ``number``, as the sources take it."""
        return f"{self.prefix}-{number:0{self.digits}d}"

    def from_match(self, match: re.Match[str]) -> str:
        """The canonical form of a match whose group 1 is the number (``spelled``, ``number``)."""
        return self.canonical(int(match[1]))

    def is_canonical(self, text: str) -> bool:
        """Whether ``text`` is one of these identifiers exactly as the sources take it."""
        return re.fullmatch(self.pattern, text) is not None

    def number_of(self, identifier: str) -> int:
        """The number of an identifier in its canonical form: 10023 for ORD-10023."""
        if not self.is_canonical(identifier):
            raise ValueError(f"not {self.name} ({self.shape}): {identifier!r}")
        return int(identifier[len(self.prefix) + 1 :])

    @property
    def pattern(self) -> str:
        return f"{self.prefix}-[0-9]{{{self.digits}}}"

    @property
    def description(self) -> str:
        return f"{self.name}: {self.prefix}- followed by exactly {_IN_WORDS[self.digits]} digits"

    @property
    def shape(self) -> str:
        """The form written with a letter per digit, for messages: CUST-NNNNN."""
        return f"{self.prefix}-{'N' * self.digits}"

    @property
    def example(self) -> str:
        return self.canonical(self.example_number)

    @property
    def max_length(self) -> int:
        return len(self.prefix) + 1 + self.digits

    def number(self, *, least: int = 1, padded: bool = True) -> str:
        """The number as typed: ``least`` to ``digits`` digits in group 1, after any number of
        leading zeros when ``padded`` (unpadded, a longer run of digits does not match)."""
        return rf"{'0*' if padded else ''}(\d{{{least},{self.digits}}})"

    @property
    def spelled(self) -> str:
        """The tolerant form: the prefix, a separator and the number, in group 1 ("cust 42",
        "CUST_00042")."""
        return self.spelled_with("")

    def spelled_with(self, marker: str) -> str:
        """``spelled`` with ``marker`` (a pattern, such as ``#?``) before the number."""
        return f"{self.prefix}{SEPARATOR}{marker}{self.number()}"


@dataclass(frozen=True)
class Sku:
    """A stock-keeping unit: a prefix, digits, a hyphen and capital letters: SKU-4417-BLK."""

    prefix: str
    digits: int
    letters: int
    example: str

    def canonical(self, number: str, letters: str) -> str:
        return f"{self.prefix}-{number}-{letters.upper()}"

    def numbered(self, number: int, letters: str) -> str:
        """The SKU of ``number``, zero-padded to ``digits`` digits, and ``letters``."""
        return self.canonical(f"{number:0{self.digits}d}", letters)

    def from_match(self, match: re.Match[str]) -> str:
        """The canonical form of a match of ``spelled``."""
        return self.canonical(match[1], match[2])

    @property
    def pattern(self) -> str:
        return f"{self.prefix}-[0-9]{{{self.digits}}}-[A-Z]{{{self.letters}}}"

    @property
    def description(self) -> str:
        digits, letters = _IN_WORDS[self.digits], _IN_WORDS[self.letters]
        return f"a SKU: {self.prefix}-, {digits} digits, a hyphen and {letters} capital letters"

    @property
    def max_length(self) -> int:
        return len(self.prefix) + 1 + self.digits + 1 + self.letters

    @property
    def spelled(self) -> str:
        """The tolerant form, the digits in group 1 and the letters in group 2 ("sku 4417 blk")."""
        return rf"{self.prefix}{SEPARATOR}(\d{{{self.digits}}}){SEPARATOR}([A-Za-z]{{{self.letters}}})"


_WORD = "[A-Z0-9]+"


@dataclass(frozen=True)
class ArticleId:
    """A policy article id: a prefix, a hyphen and words of capitals and digits: KB-REFUNDS."""

    prefix: str
    example: str
    max_length: int

    def canonical(self, written: str) -> str:
        """An article id written in any case, words joined by hyphens or underscores, as the
        knowledge base takes it."""
        return written.upper().replace("_", "-")

    def from_match(self, match: re.Match[str]) -> str:
        """The canonical form of a match of ``spelled``."""
        return self.canonical(f"{self.prefix}-{match[1]}")

    @property
    def pattern(self) -> str:
        return f"{self.prefix}-{_WORD}(-{_WORD})*"

    @property
    def description(self) -> str:
        return f"a policy article id: {self.prefix}- followed by capital letters, digits and hyphens"

    @property
    def spelled(self) -> str:
        """The tolerant form, what follows the prefix in group 1 ("kb refunds", "KB_DAMAGED_ITEMS").

        Only for a value known to be an article id: in free text "kb refunds" is search words.
        """
        return f"{self.prefix}{SEPARATOR}({_WORD}(?:[-_]{_WORD})*)"


@dataclass(frozen=True)
class Email:
    """An email address, which the customers tool takes in lower case."""

    pattern: str
    spelled: str  # anything shaped like an address, valid or not: a repair reads it as one
    description: str
    example: str
    max_length: int

    def canonical(self, written: str) -> str:
        return written.strip().lower()

    def from_match(self, match: re.Match[str]) -> str:
        return self.canonical(match[0])


CUSTOMER_ID = NumberedId(
    "a customer id", "CUST", digits=5, nouns=("customer", "cust", "cx"), example_number=42
)
ORDER_ID = NumberedId("an order id", "ORD", digits=5, nouns=("order", "ord"), example_number=10023)
SKU = Sku("SKU", digits=4, letters=3, example="SKU-4417-BLK")
ARTICLE_ID = ArticleId("KB", example="KB-REFUNDS", max_length=40)
EMAIL = Email(
    pattern=r"[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}",
    # No spaces, one @, a dot after it: the text a repair lower-cases. In free text, an address is
    # ``pattern`` in any case: compile it with ``re.I | re.A`` (ASCII letters only, as it means).
    spelled=r"[^@\s]+@[^@\s]+\.[^@\s]+",
    description="a lowercase email address without spaces (user@domain.com)",
    example="jane.doe@example.com",
    max_length=254,
)


def names(text: str, identifier: str) -> bool:
    """Whether ``text`` names ``identifier`` whole, in any case: "TCK-12" is not in "TCK-1234" nor in
    "XTCK-12", "ord-10134" names ORD-10134."""
    return re.search(rf"(?<![\w-]){re.escape(identifier)}(?![\w-])", text, re.IGNORECASE) is not None
