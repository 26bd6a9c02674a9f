"""Reading a query: what it names (mentions) and what it asks (intents), as a support agent writes it.

Identifiers are read in the forms people type them and normalized to the form the sources take:

    emails          any case                        -> lower case
    customer ids    CUST-00042, cust-42, CUST 42, customer 42, customer #42      -> CUST-00042
    order ids       ORD-10023, ord 10023, order 10023, order #10023, #10023       -> ORD-10023
    SKUs            sku-4417-blk                    -> SKU-4417-BLK
    KB articles     kb-refunds                      -> KB-REFUNDS
    amounts         £45, 45 GBP, £1.2k, 45p, "refund twelve fifty", 2 x £39 (``coordinator.planning.money``)
    dates           2026-10-01, 1 Oct 2026, October 2026, since last month, last 30 days
    people          a first name, or first and last name ("jane", "Jane Doe")

Each recognised span is blanked before the next kind is read, so "order 10023" is one order and not
also the word "order". What is left is read for intents (``coordinator.planning.intents``) with typos in
ordinary words corrected against the intents' vocabulary (rapidfuzz); identifiers are never
corrected. Dates are read relative to the demo world's calendar (``sources.domain.TODAY``), with
dateparser for the phrases people write.

An amount in another currency ("129 Euro" in a pasted email) is set aside, whole as it was typed
(``Reading.other_currency``): no number of it is read as pounds, and the planner lists it as not
researched, saying to give it in pounds, while the rest of the query is researched. A date that does
not exist, an empty or oversized query, or one with control characters is a ``QueryError`` whose
message says what to write instead.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

from coordinator.planning.english import correct, is_english
from coordinator.planning.intents import INTENTS, Intent, vocabulary
from coordinator.planning.lexicon import (
    CONTRAST_PHRASES,
    COURTESY_WORDS,
    FULL_AMOUNT_PHRASES,
    GENERIC_WORDS,
    ID_KIND_WORDS,
    LIGHT_WORDS,
    LINK_UNITS,
    NEGATION_WORDS,
    NOT_NAMES,
    RECORD_NOUNS,
    REQUEST_WORDS,
    SHORTHAND,
    STOPWORDS,
    TIME_FILLERS,
    TOKEN,
    TOPIC_WORDS,
)
from coordinator.planning.meaning import nearest_intent
from coordinator.planning.money import COUNT, FULL_AMOUNT, IN_POUNDS, UNREAD_AFTER, UNREAD_BEFORE, count
from coordinator.planning.query_error import QueryError
from coordinator.planning.spans import ASKS, COURTESY, STORY, Span, cut, sentences
from sources.catalogue import record_fields
from sources.deferred import deferred
from sources.domain import TODAY, pounds
from sources.identifiers import ARTICLE_ID, CUSTOMER_ID, EMAIL, ORDER_ID, SKU, NumberedId

if TYPE_CHECKING:
    import dateparser
    from faker.providers.person import en_GB, en_IN, en_US
else:
    # Faker's name lists (the demo world's own generator) serve as the gazetteer of first names.
    en_GB = deferred("faker.providers.person.en_GB")
    en_IN = deferred("faker.providers.person.en_IN")
    en_US = deferred("faker.providers.person.en_US")
    dateparser = deferred("dateparser")  # only a query that mentions a date needs it

__all__ = [
    "EXCLUDABLE",
    "MAX_QUERY_BYTES",
    "MAX_QUERY_CHARS",
    "DateRange",
    "Mention",
    "QueryError",
    "Reading",
    "left_out",
    "phrase_words",
    "phrases_in",
    "quotations",
    "read_query",
    "record_words",
    "why_left_out",
]

# A pasted customer email, or a whole thread of them, fits; a pasted file does not. Reading 64,000
# characters takes the planner about a second (linear in the length; benchmarks/planner.py).
MAX_QUERY_CHARS = 64_000
# The most bytes such a query takes in UTF-8 (at most 4 a character): what a reader of raw input
# (standard input, a request's body) may hold before it refuses the rest unread.
MAX_QUERY_BYTES = 4 * MAX_QUERY_CHARS

# The kinds read in every query: email, customer_id, name, order_id, sku, article_id, amount, dates; and
# where a registered source takes them, path (a file or a folder) and the kinds its entry defines.
MentionKind = str


@dataclass(frozen=True)
class DateRange:
    """Bounds on when something happened, as ISO dates; either may be open."""

    after: str | None
    before: str | None


@dataclass(frozen=True)
class Mention:
    """One thing the query names: its kind, its normalized value, and the words that named it."""

    kind: MentionKind
    value: Any
    text: str
    start: int

    def describe(self) -> str:
        if self.kind == "amount":
            return pounds(self.value)
        if self.kind == "dates":
            bounds = [
                f"from {self.value.after}" if self.value.after else "",
                f"to {self.value.before}" if self.value.before else "",
            ]
            return f"'{self.text}' ({' '.join(b for b in bounds if b)})"  # fmt: skip
        if self.kind == "name":
            return f"the person '{self.text}'"
        return str(self.value)


@dataclass(frozen=True)
class Reading:
    """What a query names and asks."""

    query: str
    mentions: tuple[Mention, ...]
    intents: frozenset[str]
    weak_intents: frozenset[str]  # asked only by nouns that ask where there is something to look up
    words: tuple[str, ...]  # every remaining word, typos corrected, in order
    topic: tuple[str, ...]  # the words worth searching for
    corrections: tuple[tuple[str, str], ...]  # (as written, read as)
    spans: tuple[Span, ...] = ()  # the query's clauses and their roles (coordinator.planning.spans)
    # Read, and qualifying nothing: a story's dates, and a customer's own name beside their email or id.
    context: tuple[Mention, ...] = ()
    full_amount: str = ""  # "in full", "the whole order": the order's paid amount is the amount
    inferred: frozenset[str] = frozenset()  # intents only the semantic matcher read (no keyword asks them)
    # Named only to be left out: negated, excluded, contrasted or quoted ("not about ORD-10134",
    # 'unlike "ORD-10134"'); never researched, never acted on (``excluded``).
    excluded: tuple[Mention, ...] = ()
    leaving: tuple[tuple[int, int], ...] = ()  # where the words that leave each of them out are
    # Each amount in another currency, as typed ("129 Euro"): billing works in pounds, so none is read.
    other_currency: tuple[str, ...] = ()
    # Each thing that looks like an amount and is not one to check, as typed, and why: "£1.299", a
    # range "£45-£50", two amounts "£45 or £50" (``coordinator.planning.money``). None is read in part.
    unread_amounts: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def quoted(self) -> list[tuple[int, int]]:
        """Where the query quotes something (``quotations``)."""
        return quotations(self.query)

    def leaving_at(self, at: int) -> bool:
        """Whether the word at ``at`` is one that leaves a mention out ("never mind" ORD-10134): no ask."""
        return any(start <= at < end for start, end in self.leaving)

    def positive(self, at: int, span: Span) -> bool:
        """Whether what is named at ``at`` (in ``span``) is named positively (``left_out``)."""
        return not left_out(self.query, self.quoted, at, span)

    @functools.cached_property
    def starts(self) -> list[int]:
        """Where each mention starts, in order (to find a span's mentions by bisection)."""
        return [mention.start for mention in self.mentions]

    def mentions_in(self, span: Span) -> list[Mention]:
        """What the query names within ``span``, by bisection."""
        first, last = (bisect.bisect_left(self.starts, at) for at in (span.start, span.end))
        return list(self.mentions[first:last])

    def of(self, *kinds: MentionKind) -> list[Mention]:
        return [mention for mention in self.mentions if mention.kind in kinds]

    def values(self, kind: MentionKind) -> list[Any]:
        return list(dict.fromkeys(mention.value for mention in self.of(kind)))


# --- what is named only to be left out --------------------------------------------------------------

# Where a quotation is: in double, curly or back quotes, or single quotes that are not apostrophes.
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’|`[^`\n]*`|(?<!\w)'[^'\n]*'(?!\w)")
# The kinds of thing a question may name only to leave out: what would be looked up or acted on.
EXCLUDABLE = frozenset({"email", "customer_id", "order_id", "sku", "article_id"})
# What may stand between a negation and what it leaves out ("not about order ORD-10134", "except for").
_GOVERNED = STOPWORDS | RECORD_NOUNS
_WORD = re.compile(r"[A-Za-z]{2,}")
_ID_END = re.compile(r"^\S+")


def quotations(text: str) -> list[tuple[int, int]]:
    """Where ``text`` quotes something."""
    return [found.span() for found in _QUOTED.finditer(text)]


def left_out(
    text: str, quoted: list[tuple[int, int]], at: int, span: Span | None, *, strict: bool = True
) -> str:
    """Why what is named at ``at`` (in ``span``) is not named positively, or "" if it is: it is quoted, or
    a negation (``NEGATION_WORDS``) or contrast (``CONTRAST_PHRASES``) comes before it in its span ("not
    ORD-10134", "other than ORD-10134", "except", "unlike", "instead of"); the reason is the words that
    leave it out, as written ("not about ORD-10134"), or "quoted". One rule for writes and research:
    ``strict`` (a write's target) takes any negation before it in its span ("do not refund £45 on
    ORD-10031" asks no refund) and any quotation; research (not ``strict``) only a negation that governs
    it, function words alone between ("not about", "except for order"; "do not refund £45 on ORD-10031"
    still asks whether it may be), and a quotation of more than the thing itself ('where is "ORD-10031"?'
    names it; 'unlike "ORD-10134, never refund it"' is someone's words).
    """
    quote = next(((start, end) for start, end in quoted if start <= at < end), None)
    if quote is not None and (
        strict or _WORD.search(text, quote[0], at) or _WORD.search(_ID_END.sub("", text[at : quote[1]]))
    ):
        return "quoted"
    start = _leaving_from(at, span, strict=strict)
    return "" if start is None else " ".join(text[start:at].split())


def _leaving_from(at: int, span: Span | None, *, strict: bool) -> int | None:
    """Where the words that leave out what is named at ``at`` begin ("not about", "never mind"), as
    ``left_out`` reads them; None where none do."""
    before = [token for token in (span.tokens if span is not None else ()) if token.start < at]
    written = [token.written for token in before]
    found = [(i, 1) for i, word in enumerate(written) if word in NEGATION_WORDS]
    for phrase in CONTRAST_PHRASES:
        size = len(phrase.split())
        found += [(i, size) for i in range(len(written)) if " ".join(written[i : i + size]) == phrase]
    if not strict:
        found = [(i, size) for i, size in found if all(word in _GOVERNED for word in written[i + size :])]
    return before[min(i for i, _ in found)].start if found else None


def _excluded(text: str, spans: list[Span], mentions: list[Mention]) -> list[Mention]:
    """The ids and emails ``mentions`` name only to leave out (``left_out``, as research reads it)."""
    quoted = quotations(text)
    return [
        mention
        for mention in mentions
        if mention.kind in EXCLUDABLE
        and left_out(text, quoted, mention.start, _span_at(spans, mention.start), strict=False)
    ]


def _span_at(spans: Sequence[Span], at: int) -> Span | None:
    index = bisect.bisect_right([span.start for span in spans], at) - 1
    return spans[index] if index >= 0 and at < spans[index].end else None


def why_left_out(reading: Reading, mention: Mention) -> str:
    """Why ``mention`` (one of ``reading.excluded``) is not researched, in the question's own words."""
    span = _span_at(reading.spans, mention.start)
    said = left_out(reading.query, reading.quoted, mention.start, span, strict=False)
    if said == "quoted" or not said:
        return "the question only quotes it, which asks nothing of it"
    said = re.sub(r"\s*[\"“”‘’`]\s*", " ", said).strip()
    return f"the question names it only to leave it out ('{said} {mention.text}')"


# --- identifiers -----------------------------------------------------------------------------------

# Each identifier's shape, tolerant spellings and canonical form are the sources' own
# (``sources.identifiers``); what is read here is how people write them in a sentence.
_EMAIL = re.compile(EMAIL.pattern, re.I | re.A)  # re.A: ASCII letters in any case, no others
# In a sentence only the published form is an article id: "kb refunds" is words to search for.
_ARTICLE = re.compile(rf"\b{ARTICLE_ID.pattern}\b", re.I)
_SKU = re.compile(rf"\b{SKU.spelled}\b", re.I)


def _in_a_sentence(identifier: NumberedId, number: str) -> tuple[re.Pattern[str], ...]:
    """An id as written in a sentence: spelled, perhaps after its noun ("CUST-42", "customer id
    cust #42"), or its noun and ``number`` alone ("customer #42", "order no. 10023", "ORDER-10023")."""
    noun = f"(?:{'|'.join(identifier.nouns)})"
    return (
        re.compile(rf"\b(?:{noun}\s+(?:id\s+)?)?{identifier.spelled_with('#?')}\b", re.I),
        re.compile(rf"\b{noun}(?:\s*|-)(?:id\s*)?(?:#|no\.?\s*|number\s+)?{number}\b", re.I),
    )


_CUSTOMER_IDS = _in_a_sentence(CUSTOMER_ID, CUSTOMER_ID.number())
# A number after "order", or after "#" alone, is an order id only from four digits on ("order 2"
# is a count) and without padding zeros.
_ORDER_NUMBER = ORDER_ID.number(least=4, padded=False)
_ORDER_IDS = (*_in_a_sentence(ORDER_ID, _ORDER_NUMBER), re.compile(rf"(?<![\w£$€#])#{_ORDER_NUMBER}\b"))

# --- money: amounts as people say them (``coordinator.planning.money``) ---------------------------

# A count of links: "two hops out", "3 links away", "depth 2".
_LINKS = re.compile(
    rf"\b(?P<count>{COUNT})\s+(?:{'|'.join(sorted(LINK_UNITS))})\b"
    rf"|\bdepth\s+(?:of\s+)?(?P<depth>{COUNT})\b",
    re.I,
)


# An id ("TCK-20051", "CUSTOMER-777", "REFUND-77": ``_is_an_id``), not a file named like one
# ("TCK-20051.md"), nor a part of a year ("mid-2024", "pre-2020"; "Mar-2024" is read as a date before
# ids are looked for).
_ID_SHAPE = re.compile(
    r"\b(?!(?:mid|early|late|pre|post|end)-(?:19|20)\d\d\b)(?P<prefix>[A-Za-z]{2,10})-(?P<number>\d+)\b(?!\.\w)",
    re.I,
)
_KNOWN_PREFIXES = {ORDER_ID.prefix, CUSTOMER_ID.prefix, SKU.prefix, ARTICLE_ID.prefix}
# A word with a slash in it: a path ("/tmp/pytest-917/notes.md", "docs/TCK-20051.md": folders and
# files), unless it is ids alone, joined by slashes ("TCK-20051/INV-40008": a list).
_SLASHED = re.compile(r"\S*[/\\]\S*")
_SLASH = re.compile(r"[/\\]")
_AROUND_A_WORD = "\"'()[]{}<>.,;:!?"


def unknown_ids(text: str, read: Iterable[Mention] = ()) -> list[str]:
    """The ids in ``text`` of a kind no built-in tool takes ("TCK-20051", "INV-40008"), upper case, once
    each; none where ``text`` was ``read`` as something else (the date "Mar-2024")."""
    text = _SLASHED.sub(_unless_ids_alone, text)  # a path blanked, every offset kept
    for mention in read:
        end = mention.start + len(mention.text)
        text = text[: mention.start] + " " * len(mention.text) + text[end:]
    found = (match.group(0).upper() for match in _ID_SHAPE.finditer(text) if _is_an_id(match))
    return list(dict.fromkeys(i for i in found if i.split("-")[0] not in _KNOWN_PREFIXES))


def _is_an_id(match: re.Match[str] | None) -> bool:
    """Whether an id's shape is an id: a number of three digits or more ("TCK-20051"), or a shorter one
    after a kind of record ("REFUND-77", "TCK-12"); "COVID-19" and "top-10" are none."""
    if match is None:
        return False
    prefix = match["prefix"].lower()
    return len(match["number"]) >= 3 or SHORTHAND.get(prefix, prefix) in ID_KIND_WORDS


def _unless_ids_alone(slashed: re.Match[str]) -> str:
    """The word as it is where every part between its slashes is an id; blanks for a path."""
    word = slashed.group(0)
    parts = _SLASH.split(word.strip(_AROUND_A_WORD))
    return word if all(_is_an_id(_ID_SHAPE.fullmatch(part)) for part in parts) else " " * len(word)


def _links(match: re.Match[str]) -> int:
    return count(match["count"] or match["depth"])


# An amount in another currency, whole as it was typed (what the gap quotes): "$450", "US$1,250.50",
# "€12,50", "USD 45", "450 €", "45 dollars", "$5k". A number ends on a digit: "$450." quotes "$450". The
# number before a symbol or word starts a number ("10031 $" of "ORD-10031 $45" is none).
_TYPED_NUMBER = r"\d(?:[\d,.]*\d)?"
_CURRENCY_CODE = r"(?:USD|EUR|JPY|AUD|CAD|INR|CHF)"
_OTHER_CURRENCY = re.compile(
    rf"(?:\b(?:US|AU|CA|NZ|HK|A|C|S))?[$€¥₹]\s?{_TYPED_NUMBER}(?:k\b)?"
    rf"|\b{_CURRENCY_CODE}\s?{_TYPED_NUMBER}(?:k\b)?"
    rf"|(?<![\w.,-]){_TYPED_NUMBER}k?\s?(?:[$€¥₹]|(?:{_CURRENCY_CODE}|dollars?|euros?|bucks|yen|rupees?|cents?)\b)",
    re.I,
)

# --- dates -----------------------------------------------------------------------------------------

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_UNIT = r"(?:days?|weeks?|fortnights?|months?|years?)"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_WHEN = (
    r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}"
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?"
    rf"|{_MONTH}\s+{_DAY}(?:,?\s+\d{{4}})?(?!\d)"
    rf"|{_MONTH}(?:\s+|-)\d{{4}}"  # "March 2024", "Mar-2024"
    r"|(?:last|this|previous)\s+(?:week|month|year)"
    rf"|(?:the\s+)?(?:last|past|previous)\s+{COUNT}\s+{_UNIT}"
    r"|(?:the\s+)?past\s+(?:week|month|year)|(?:the\s+)?(?:past|last)\s+fortnight"
    rf"|{COUNT}\s+{_UNIT}\s+ago"
    r"|yesterday"
)
_KEYWORD = r"since|after|from|starting|before|b4|until|till|up\s+to|in|during|on|for"
_DATES = re.compile(
    rf"\bbetween\s+(?P<first>{_WHEN})\s+and\s+(?P<second>{_WHEN})\b"
    rf"|\b(?:(?P<keyword>{_KEYWORD})\s+(?:the\s+)?)?(?P<when>{_WHEN})\b"
    # A month or a year alone is a date only after a word that says so ("in october", "since 2025").
    rf"|\b(?P<bare_keyword>{_KEYWORD})\s+(?:the\s+)?(?P<bare>{_MONTH}|20\d\d)(?=\W|$)"
    # or before the order it dates ("her October order"; not "may", a verb as often as a month)
    rf"|\b(?!may\b)(?P<month_of>{_MONTH})(?=\s+(?:order|orders|purchase|purchases)\b)",
    re.I,
)
_LAST_N = re.compile(rf"(?:the\s+)?(?:last|past|previous)\s+(?P<count>{COUNT})\s+(?P<unit>{_UNIT})", re.I)
_PAST_ONE = re.compile(
    r"(?:the\s+)?(?:past|last)\s+(?P<unit>fortnight)|(?:the\s+)?past\s+(?P<unit2>week|month|year)", re.I
)

# A path as people write one: from the root, home or here ("/srv/docs", "~/notes", "./docs", "../a"),
# or folders and a file with an extension ("docs/refund-policy.md"). "and/or" is no path.
# A name: a hidden one may start with a dot, other dots only inside it, so "./docs." ends at "docs".
_SEGMENT = r"\.?[\w@+-]+(?:\.[\w@+-]+)*"
_PATH = re.compile(
    rf"(?<![\w/.:~])(?:(?:~|\.{{1,2}})?(?:/{_SEGMENT})+/?"
    rf"|[\w-]+(?:/{_SEGMENT})*/[\w@+-]+(?:\.[\w@+-]+)*\.[A-Za-z0-9]{{1,8}})"
    r"(?![\w/])"
)


def _path(match: re.Match[str]) -> str:
    """A path, made absolute against the working folder: a server resolves a relative one its own way
    (the filesystem server against its first allowed folder), so the one the person meant is sent."""
    return str(Path(match[0]).expanduser().resolve())


def _check(query: str) -> str:
    text = query.strip()
    if not text:
        raise QueryError(
            'the query is empty; ask a question, e.g. "Investigate jane.doe@example.com: recent orders"'
        )
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(text):,} characters long; keep it under {MAX_QUERY_CHARS:,}")
    control = next(
        (char for char in text if unicodedata.category(char) == "Cc" and char not in "\t\n\r"), None
    )
    if control is not None:
        raise QueryError(
            f"the query holds a control character (U+{ord(control):04X}); remove it and ask again"
        )
    return text


class _Scanner:
    """Finds mentions kind by kind, blanking each span so that no later kind reads it again."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.left = text
        self.mentions: list[Mention] = []
        self.set_aside: list[str] = []
        self.unread: list[tuple[str, str]] = []  # (as typed, why): what looks like an amount and is not one

    def take(self, pattern: re.Pattern[str], kind: MentionKind, value: Any) -> None:
        """Read every match of ``pattern`` (only its ``span`` group, where it has one) as a mention."""
        for match in list(pattern.finditer(self.left)):
            normalized = value(match)
            if normalized is None:
                continue
            start, end = match.span("span") if "span" in pattern.groupindex else match.span()
            self.mentions.append(Mention(kind, normalized, self.text[start:end].strip(), start))
            self.blank(start, end)

    def set_aside_every(self, pattern: re.Pattern[str], why: str = "") -> None:
        """Blank every match of ``pattern`` (only its ``span`` group, where it has one), read as nothing,
        and keep it as typed: in ``unread`` with ``why`` where given, else in ``set_aside``."""
        for match in list(pattern.finditer(self.left)):
            start, end = (
                match.span("span") if "span" in pattern.groupindex and match["span"] else match.span()
            )
            typed = self.text[start:end].strip()
            if why:
                self.unread.append((typed, why))
            else:
                self.set_aside.append(typed)
            self.blank(start, end)

    def blank(self, start: int, end: int) -> None:
        self.left = self.left[:start] + " " * (end - start) + self.left[end:]


@functools.cache
def _date_parser() -> Any:
    return dateparser.date.DateDataParser(
        languages=["en"],
        settings={
            "RELATIVE_BASE": datetime.combine(TODAY, datetime.min.time()),
            "PREFER_DATES_FROM": "past",
            "DATE_ORDER": "DMY",
        },
    )


def _period(phrase: str) -> tuple[date, date]:
    """The first and last day a date phrase covers, relative to the world's calendar."""
    text = re.sub(r"(?<=[a-z.])-(?=\d{4}$)", " ", " ".join(phrase.lower().split()))  # "mar-2024"
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise QueryError(
                f"{phrase} is not a real date; write dates as YYYY-MM-DD, e.g. 2026-10-01"
            ) from None
        return day, day
    if last := _LAST_N.fullmatch(text):
        return _back(count(last["count"]), last["unit"]), TODAY
    if past := _PAST_ONE.fullmatch(text):
        return _back(1, past["unit"] or past["unit2"]), TODAY
    parsed = _date_parser().get_date_data(text)
    if parsed.date_obj is None:
        raise QueryError(f"'{phrase}' is not a date I can read; write it as YYYY-MM-DD, e.g. 2026-10-01")
    day = parsed.date_obj.date()
    if parsed.period == "month":
        return day.replace(day=1), day.replace(day=calendar.monthrange(day.year, day.month)[1])
    if parsed.period == "year":
        return date(day.year, 1, 1), date(day.year, 12, 31)
    if parsed.period == "week":  # "last week", "3 weeks ago": from that day on
        return day, TODAY
    return day, day


def _back(count: int, unit: str) -> date:
    days = {"day": 1, "week": 7, "fortnight": 14, "month": 30, "year": 365}[unit.rstrip("s")]
    return TODAY - timedelta(days=count * days)


def _dates(match: re.Match[str]) -> DateRange:
    if match["first"]:
        return _bounds(_period(match["first"])[0], _period(match["second"])[1])
    first, last = _period(match["when"] or match["bare"] or match["month_of"])
    keyword = " ".join((match["keyword"] or match["bare_keyword"] or "").lower().split())
    keyword = SHORTHAND.get(keyword, keyword)  # "b4 2026-06-01"
    if keyword == "from" and last > first:  # "orders from October 2026": placed in it
        return _bounds(first, last)
    if keyword in ("since", "after", "from", "starting"):
        return _bounds(first, None)
    if keyword == "before":
        return _bounds(None, first - timedelta(days=1))
    if keyword in ("until", "till", "up to"):
        return _bounds(None, last)
    return _bounds(first, last)


def _bounds(after: date | None, before: date | None) -> DateRange:
    # Nothing was placed after the world's today: a bound at or past it bounds nothing.
    return DateRange(
        after.isoformat() if after else None, before.isoformat() if before and before < TODAY else None
    )


@functools.cache
def _first_names() -> frozenset[str]:
    British, American, Indian = en_GB.Provider, en_US.Provider, en_IN.Provider
    names = [
        *British.first_names_male,
        *British.first_names_female,
        *American.first_names,
        *Indian.first_names,
    ]
    return frozenset(name.lower() for name in names)


@functools.cache
def _last_names() -> frozenset[str]:
    providers = (en_GB.Provider, en_US.Provider, en_IN.Provider)
    return frozenset(name.lower() for provider in providers for name in provider.last_names)


@functools.cache
def _vocabulary() -> tuple[frozenset[str], list[str]]:
    # and the words of what records hold: "cancelld" is "cancelled", a status
    words = vocabulary() | {word for word in record_words() if len(word) > 3}
    return words, sorted(words)


def _correct(word: str) -> str:
    """A word as the vocabulary knows it: itself if known, else the one close spelling (typos)."""
    if word in SHORTHAND:
        return SHORTHAND[word]
    known, choices = _vocabulary()
    if word in known or word in STOPWORDS or len(word) < 4:
        return word
    # Damerau-Levenshtein: a swapped pair of letters ("refudn") is one slip, as a missing one is. An
    # English word is never a typo ("chipped" is not "shipped"): asked of the word list only then.
    best = process.extractOne(
        word, choices, scorer=DamerauLevenshtein.normalized_similarity, score_cutoff=0.8
    )
    return best[0] if best and not is_english(word) else word


def _names(scanner: _Scanner) -> list[Mention]:
    """People named by first name (and a last name after it). A name in the same sentence as an email
    or a customer id, or one its email spells ("Joan White", joan.white@example.com), is that
    customer's name: returned (and blanked) as context, not looked up again. "does jane have
    complaints? and what did cust 42 buy" names two people."""
    identified = [m.start for m in scanner.mentions if m.kind in ("email", "customer_id")]
    ends = [found.end() for found in re.finditer(r"[.!?;]+(?=\s|$)", scanner.left)]
    mailed = {
        part
        for m in scanner.mentions
        if m.kind == "email"
        for part in re.split(r"[._+-]", m.value.split("@")[0])
    }
    sentence = functools.partial(bisect.bisect_right, ends)
    named = {sentence(start) for start in identified}
    known = _vocabulary()[0]
    tokens = list(re.finditer(r"[A-Za-z][A-Za-z'-]*", scanner.left))
    skip_until = -1
    aliases: list[Mention] = []
    for index, token in enumerate(tokens):
        word = token[0].lower().removesuffix("'s")
        if token.start() < skip_until:
            continue
        # The planner's own words first: only a word they leave (or a capitalised pair, "Jack Griffiths")
        # is looked up among first names, so a query of known words alone never loads Faker's lists of
        # them (start-up).
        if (word in NOT_NAMES or word in STOPWORDS or word in known) and not _capitalised_pair(tokens, index):
            continue
        if word not in _first_names():
            continue
        end = token.end()
        if index + 1 < len(tokens) and not token[0].lower().endswith("'s"):
            following = tokens[index + 1]
            last = following[0].lower().removesuffix("'s")
            adjacent = scanner.left[token.end() : following.start()].strip(" \t") == ""  # not across lines
            if adjacent and last not in STOPWORDS and last not in known and _correct(last) not in known:
                end = following.end()
        written = scanner.left[token.start() : end]
        name = re.sub(r"'s\b", "", written).removesuffix("'")  # "Jack Griffiths' tickets"
        mention = Mention("name", name, name, token.start())
        # "Sam" signing samantha.quinn@example.org's letter: a short form of a name the email spells
        short = len(word) > 2 and any(part.startswith(word) for part in mailed)
        if sentence(token.start()) in named or word in mailed or short:
            aliases.append(mention)
        else:
            scanner.mentions.append(mention)
        scanner.blank(token.start(), end)
        skip_until = end
    # "Mr Patel's grinder": a surname after a title names a customer too (find_customers matches a
    # word of the name); a first name after it was read above. Beside an order named ("half of order
    # 10412 for Mrs Hussain"), a surname alone is that order's customer, whom its record names.
    named |= {sentence(m.start) for m in scanner.mentions if m.kind == "order_id"}
    for titled in _TITLED.finditer(scanner.left):
        name = titled[1].removesuffix("'s")
        if name.lower() in known or name.lower() in STOPWORDS:
            continue
        mention = Mention("name", name, name, titled.start(1))
        (aliases if sentence(titled.start()) in named else scanner.mentions).append(mention)
        scanner.blank(titled.start(), titled.end())
    return aliases


def _capitalised_pair(tokens: list[re.Match[str]], index: int) -> bool:
    """ "Jack Griffiths", "Dawn Byrne": a first name that is also a word ("jack", "dawn") is a name
    where it and the next word are capitalised, side by side, and that word is a surname: no word
    the planner knows, and a surname people have ("Grant Access" is not a person)."""
    if index + 1 >= len(tokens):
        return False
    first, following = tokens[index][0], tokens[index + 1][0]
    last = following.lower().removesuffix("'s").removesuffix("'")
    known = _vocabulary()[0]
    return (
        first[:1].isupper() and first[1:].islower() and following[:1].isupper() and following[1:2].islower()
        and tokens[index].end() + 1 == tokens[index + 1].start()
        and last not in known and last not in STOPWORDS and last in _last_names()
    )  # fmt: skip


_TITLED = re.compile(r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr)\.?\s+([A-Z][a-z][A-Za-z'-]*)")


def _separated(intent: Intent, phrases_text: str) -> bool:
    """Whether ``intent``'s separable phrasal verb is in the text: "send the cold brew maker back"."""
    pattern = _separable_patterns().get(intent.name)
    return pattern is not None and pattern.search(phrases_text) is not None


@functools.cache
def _separable_patterns() -> dict[str, re.Pattern[str]]:
    return {
        intent.name: re.compile(rf"\b(?:{'|'.join(verbs)})\b(?:\s+\S+){{0,5}}?\s+{particle}\b")
        for intent in INTENTS
        if intent.separable is not None
        for verbs, particle, _ in [intent.separable]
    }


def _intents(words: list[str], phrases_text: str) -> tuple[frozenset[str], frozenset[str]]:
    found, weak = set(), set()
    for intent in INTENTS:
        if (
            intent.words.intersection(words)
            or any(pattern.search(phrases_text) for pattern in _phrase_patterns()[intent.name])
            or _separated(intent, phrases_text)
        ):
            found.add(intent.name)
        elif intent.weak_words.intersection(words):
            weak.add(intent.name)
    return frozenset(found), frozenset(weak)


def read_query(query: str, entities: Mapping[str, str] | None = None, *, paths: bool = False) -> Reading:
    """What ``query`` names and asks; ``QueryError`` when it cannot be read as written.

    ``entities`` (kind -> pattern) are kinds of thing registered sources define, and ``paths`` reads
    paths: both only where a registered tool takes them, so that other queries read as they always have.
    """
    text = _check(query)
    scanner, aliases = _scan(text, entities, paths=paths)
    # "in full", "the whole order": an amount the order's own record holds.
    full = FULL_AMOUNT.search(scanner.left)
    for each in list(FULL_AMOUNT.finditer(scanner.left)):
        if "refund" not in each[0].lower():  # "the whole order" is an amount, not orders; "full refund" asks
            scanner.blank(*each.span())
    scanner.left = _without_accents(scanner.left)  # "cafetière" is the shop's "cafetiere"
    words, corrected, corrections = _read_words(scanner.left)
    named = [(mention.start, mention.start + len(mention.text)) for mention in scanner.mentions]
    spans = cut(text, scanner.left, named, corrected, _record_talk())
    intents, weak_intents, spans, matched_topics = _asked(spans, scanner.left)
    keyword_intents = frozenset().union(*(span.asked for span in spans))
    mentions = sorted(scanner.mentions, key=lambda mention: mention.start)
    told = _told(spans, mentions)
    excluded = _excluded(text, spans, mentions)
    # The words that leave a mention out ("never mind ORD-10134") are neither searched for nor asks.
    leaving = tuple(
        (start, mention.start)
        for mention in excluded
        if (start := _leaving_from(mention.start, _span_at(spans, mention.start), strict=False)) is not None
    )
    leaving_words = {word for start, end in leaving for word in _WORD.findall(text[start:end].lower())}
    return Reading(
        query=text,
        mentions=tuple(m for m in mentions if m not in told and m not in excluded),
        intents=intents,
        weak_intents=weak_intents,
        words=tuple(words),
        topic=tuple(
            dict.fromkeys([*(w for w in words if _is_topic(w) and w not in leaving_words), *matched_topics])
        ),
        corrections=tuple(dict.fromkeys(corrections)),
        spans=tuple(spans),
        context=(*told, *aliases),
        full_amount=full[0] if full is not None else "",
        inferred=intents - keyword_intents,
        excluded=tuple(excluded),
        leaving=leaving,
        other_currency=tuple(scanner.set_aside),
        unread_amounts=tuple(scanner.unread),
    )


def _without_accents(text: str) -> str:
    """``text`` with each word of the shop's written with accents as the shop writes it ("cafetière"
    -> "cafetiere"), one character for one, so every offset into the query still holds; other
    accented words stay as typed (they are another language, reported as not read)."""

    def plain(word: re.Match[str]) -> str:
        # unicodedata's decomposition, not a table of letters of our own
        folded = "".join(unicodedata.normalize("NFD", char)[0] for char in word[0])
        known = {folded.lower(), folded.lower().removesuffix("s")} & TOPIC_WORDS
        return folded if known and len(folded) == len(word[0]) else word[0]

    return re.sub(r"\w*[^\W\d_a-zA-Z]\w*", plain, text)


def _scan(text: str, entities: Mapping[str, str] | None, *, paths: bool) -> tuple[_Scanner, list[Mention]]:
    """Every thing ``text`` names, kind by kind (each blanked before the next kind is read); and the
    names that are a named customer's own (``_names``)."""
    scanner = _Scanner(text)
    scanner.take(_EMAIL, "email", lambda m: EMAIL.canonical(m[0]))
    if paths:  # before ids, amounts and dates: "./orders/ORD-10031.json" is one path, not an order
        scanner.take(_PATH, "path", _path)
    scanner.take(_ARTICLE, "article_id", lambda m: ARTICLE_ID.canonical(m[0]))
    scanner.take(_SKU, "sku", SKU.from_match)
    # Number 0 is read as no one's id.
    for pattern in _CUSTOMER_IDS:
        scanner.take(pattern, "customer_id", lambda m: CUSTOMER_ID.from_match(m) if int(m[1]) else None)
    for pattern in _ORDER_IDS:
        scanner.take(pattern, "order_id", lambda m: ORDER_ID.from_match(m) if int(m[1]) else None)
    # Before any amount: none of another currency's numbers is pounds ("refund 45 USD" is no refund
    # of 45); after the identifiers, which may hold one's letters ("1usd@example.com", "KB-1EUR").
    scanner.set_aside_every(_OTHER_CURRENCY)
    # An amount is read whole or set aside, never read in part ("£1.299" is not £1.29).
    for pattern, why in UNREAD_BEFORE:
        scanner.set_aside_every(pattern, why)
    for pattern, value in IN_POUNDS:
        scanner.take(pattern, "amount", value)
    for pattern, why in UNREAD_AFTER:
        scanner.set_aside_every(pattern, why)
    scanner.take(_LINKS, "links", _links)
    scanner.take(_DATES, "dates", _dates)
    for kind, written in (entities or {}).items():
        scanner.take(re.compile(written), kind, lambda m: m[0])
    return scanner, _names(scanner)


def _read_words(left: str) -> tuple[list[str], dict[str, str], list[tuple[str, str]]]:
    """The words left once what is named is blanked, typos corrected; each word as read; the corrections."""
    corrected: dict[str, str] = {}
    corrections: list[tuple[str, str]] = []
    words: list[str] = []
    for token in TOKEN.findall(left.lower()):
        word = token.removesuffix("'s")
        corrected[word] = _correct(word)
        if corrected[word] != word:
            corrections.append((word, corrected[word]))
        words.append(corrected[word])
    return words, corrected, corrections


def _told(spans: list[Span], mentions: list[Mention]) -> list[Mention]:
    """The dates a story tells ("we moved house in September"): context, never a filter."""
    starts = [span.start for span in spans]
    told = []
    for mention in mentions:
        at = bisect.bisect_right(starts, mention.start) - 1
        if mention.kind == "dates" and at >= 0 and mention.start < spans[at].end and spans[at].role == STORY:
            told.append(mention)
    return told


def _asked(
    spans: list[Span], left: str
) -> tuple[frozenset[str], frozenset[str], list[Span], tuple[str, ...]]:
    """What the spans ask, by keywords, and by meaning where the keywords leave an ask's words
    unexplained (``coordinator.planning.meaning``): the intents, the weak ones, the spans with what they ask
    and their match, and the search words matched phrasings stand for ("send it back": return)."""
    found: set[str] = set()
    weak: set[str] = set()
    read: list[Span] = []
    topics: list[str] = []
    # A story's words ask nothing where something else asks ("I bought it in May. Can I return it?"),
    # but what it says of a thing it names does ("I was charged twice for ORD-10899").
    told = {STORY} if any(span.role == ASKS for span in spans) else set()
    in_sentence = _sentence_intents(spans, left)
    for index, span in enumerate(spans):
        if span.role == COURTESY or (span.role in told and not span.names):
            read.append(span)
            continue
        phrases_text = _words_of(left, span)
        strong, light = _intents([token.word for token in span.tokens], phrases_text)
        span = replace(span, asked=strong)
        found |= strong
        weak |= light
        if span.role not in told:
            topics.extend(i.separable[2] for i in INTENTS if i.separable and _separated(i, phrases_text))
            span = _by_meaning(span, left, phrases_text, in_sentence[index], asked=bool(strong or light))
            if span.match is not None and span.match.understood:
                found.add(span.match.intent)
                topics.extend(span.match.topics)
        read.append(span)
    if told and not found:  # "mary reckons she was charged for ORD-1, can you have a look": the ask
        for index, span in enumerate(read):  # says only "look", so what the story tells is what to look at
            if span.role == STORY:
                strong, light = _intents([token.word for token in span.tokens], _words_of(left, span))
                found |= strong
                weak |= light
                read[index] = replace(span, asked=strong)
    return frozenset(found), frozenset(weak), read, tuple(topics)


def _sentence_intents(spans: list[Span], left: str) -> list[frozenset[str]]:
    """For each span, what its sentence asks by keywords."""
    asked: list[frozenset[str]] = [frozenset()] * len(spans)
    for group in sentences(spans, left):
        words = TOKEN.findall(" ".join(left[spans[i].start : spans[i].end] for i in group).lower())
        intents = _intents(words, " ".join(words))[0]
        for i in group:
            asked[i] = intents
    return asked


def _by_meaning(
    span: Span, left: str, phrases_text: str, in_sentence: frozenset[str], *, asked: bool
) -> Span:
    """``span`` with the semantic matcher's reading, where it is an ask no keyword reads: compared on
    the words nothing explains (a question of function words alone, "what can we do for her?", or
    "has she been on to us about ORD-10027?", on all of them). A sentence whose ask a keyword reads
    ("does a £750 refund on ORD-10023 need a manager to sign off") is qualified by its other clauses:
    meaning may confirm its ask there, never add another."""
    unread = span.role == ASKS and not asked
    unexplained = _unexplained(span, phrases_text) if unread else []
    if unread and span.question and not span.content:
        # Function words alone ask something only where nothing else in their sentence does ("what
        # can we do for her?"). Beside an ask the keywords read ("whether a £750 refund ... is allowed"),
        # they could at most confirm that ask, which is planned already: the matcher (0.35 s to load) is
        # not asked. The clause's tasks still come from what it names.
        unexplained = [] if in_sentence else [token.word for token in span.tokens]
    if not unexplained:
        return span
    # A word that is one slip from an English word is compared as that word ("goodwil": "goodwill").
    spelled = {word: correct(word) or word for word in unexplained if not is_english(word)}
    text = " ".join(spelled.get(word.lower(), word) for word in left[span.start : span.end].split())
    match = nearest_intent(text, [spelled.get(word, word) for word in unexplained])
    if match is None or (in_sentence and match.intent not in in_sentence):
        return span
    return replace(span, match=match)


def _words_of(left: str, span: Span) -> str:
    return " ".join(TOKEN.findall(left[span.start : span.end].lower()))


def _unexplained(span: Span, phrases_text: str) -> list[str]:
    """An ask's words that neither the intents, the topic words nor any record's fields explain."""
    known = _known_words()
    in_phrases = words_of_phrases(phrases_text)
    return [
        token.word
        for token in span.content
        if len(token.word) > 2 and token.word not in known and token.word not in in_phrases
    ]


@functools.cache
def phrase_words() -> frozenset[str]:
    """Every word of the intents' phrases ("raised" of "raised an issue")."""
    return frozenset(word for intent in INTENTS for phrase in intent.phrases for word in phrase.split())


@functools.cache
def _record_talk() -> frozenset[str]:
    """The words of what sources hold and what is asked of them: their past forms ("ordered",
    "delivered", "charged") qualify a record, where other past forms ("has been", "got it") tell a story."""
    full_words = {word for phrase in FULL_AMOUNT_PHRASES for word in phrase.split()}
    return frozenset(full_words | vocabulary() | TOPIC_WORDS | GENERIC_WORDS | record_words())


@functools.cache
def _known_words() -> frozenset[str]:
    return _record_talk() | phrase_words() | COURTESY_WORDS | LIGHT_WORDS | REQUEST_WORDS


@functools.cache
def _phrase_patterns() -> dict[str, list[re.Pattern[str]]]:
    return {intent.name: [re.compile(rf"\b{re.escape(p)}\b") for p in intent.phrases] for intent in INTENTS}


def words_of_phrases(phrases_text: str) -> set[str]:
    """The words the phrases found in ``phrases_text`` explain: the intents' ("raised an issue") and
    the emphatic time fillers ("right now"), read as a whole and not word by word."""
    found = [*phrases_in(phrases_text), *(said[0] for said in TIME_FILLERS.finditer(phrases_text))]
    return {word for phrase in found for word in phrase.split()}


def phrases_in(phrases_text: str, intents: Iterable[Intent] = INTENTS) -> list[str]:
    """The phrases of ``intents`` (every intent's by default) found in ``phrases_text`` (lower case,
    single spaces)."""
    return [
        phrase
        for intent in intents
        for phrase, pattern in zip(intent.phrases, _phrase_patterns()[intent.name], strict=True)
        if pattern.search(phrases_text)
    ]


@functools.cache
def record_words() -> frozenset[str]:
    """Every word that names a field of a record some tool returns, or a value it takes ("status",
    "delivered", "tier", "cancelled", "gold")."""
    return frozenset(
        word
        for tools in record_fields().values()
        for fields in tools.values()
        for name, field in fields.items()
        for term in (name, *field["values"])
        for word in term.split("_")
    )


_NOT_TOPICAL = frozenset().union(
    *(intent.words for intent in INTENTS if not intent.topical), *(intent.weak_words for intent in INTENTS)
)


def _is_topic(word: str) -> bool:
    """A word worth searching for: not a function word, nor a greeting, nor one that only frames the ask."""
    return (
        len(word) > 2
        and word not in STOPWORDS
        and word not in GENERIC_WORDS
        and word not in _NOT_TOPICAL
        and word not in COURTESY_WORDS
        and word not in LIGHT_WORDS
    )
