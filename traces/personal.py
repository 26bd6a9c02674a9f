"""What in a text identifies a person, and where: one detector per kind, found once for every use.

Kinds, in the order an overlap is settled (the first kind to claim characters keeps them):

* ``email``: anything shaped like an address, whatever a tool's own format accepts;
* ``card``: a run of 13 to 19 digits (spaces or dashes between them allowed) passing the Luhn check;
* ``address``: a street line (a house number, capitalised words, a street word: "221B Baker Street"),
  with what follows it up to a UK postcode or a US "ST 12345" when one is near; a UK postcode alone;
* ``phone``: what Google's libphonenumber finds (national or international, any country; UK reading
  first), of at least 10 digits, so that a short id or a date is never one;
* ``name``: a name this process was told of (``know_names``: the world's customers), a title and a
  surname ("Mrs Okafor"), or a capitalised name after a word that introduces a person ("who is",
  "from:", "dear", "named"...).

Names are the uncertain kind: a name in lower case, or one no cue word introduces and nobody registered,
is not found. Ordinary ids (ORD-10023, CUST-00042), amounts and dates are none of these kinds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Found", "found_in", "know_names", "known_names", "redacted"]


@dataclass(frozen=True)
class Found:
    start: int
    end: int
    kind: str


# Deliberately not the customers tool's email format (``sources.identifiers.EMAIL``), and not only
# because traces imports no other package: a redaction detector must catch any email-shaped text,
# including addresses that format refuses (upper case, "jane@mail..example.com"). Narrowed to the
# tool's format, it would leak the personal data in every query and argument the tool would reject.
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")

# A digit run long enough to be a phone or card number (9 digits or more, short separators between):
# the cheap test that decides whether libphonenumber and the Luhn check are asked at all.
_LONG_NUMBER = re.compile(r"\d(?:[\s().-]{0,3}\d){8,}")
_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_PHONE_DIGITS = 10  # the shortest national number kept as a phone (UK 10-11, US 10 digits)

_WORD = r"[A-Z][^\W\d_]*(?:['’-][^\W\d_]+)*"  # a capitalised word: Jane, O'Brien, McDonald, Smith-Jones
_STREET_WORDS = (
    "Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Way|Close|Court|Ct|Place|Pl|Crescent|Cres|Terrace|"
    "Gardens|Grove|Square|Sq|Boulevard|Blvd|Parkway|Pkwy|Hill|Row|Mews|Parade|Walk|Park|Green"
)
_STREET = re.compile(rf"\b\d{{1,5}}[A-Za-z]?,?\s+(?:{_WORD}\s+){{1,4}}(?:{_STREET_WORDS})\b\.?")
_POSTCODE = re.compile(r"\b(?:[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}|(?<=, )[A-Z]{2}\s\d{5}(?:-\d{4})?)\b")
_BETWEEN_STREET_AND_POSTCODE = re.compile(r"[\s,]*(?:[A-Z][^\W\d_]*[\s,]+){0,6}")

_NAME_RUN = re.compile(rf"\b{_WORD}(?:[ \t]+{_WORD})+")  # capitalised words in a row, where a name may be
_TITLED = re.compile(rf"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Sir|Dame)\.?[ \t]+{_WORD}(?:[ \t]+{_WORD})?")
_CUE = (
    r"(?i:who\s+is|who's|named|called|(?:my\s+)?name\s+is|name:|from:|to:|cc:|attn:?|dear|contact:?"
    r"|signed|regards,?|customer:?|client:?)"
)
_CUED = re.compile(rf"\b{_CUE}[ \t]+(?P<name>{_WORD}(?:[ \t]+{_WORD}){{1,2}})")

_known: frozenset[str] = frozenset()


def know_names(names: Iterable[str]) -> None:
    """Names to find wherever they appear capitalised (the world's customers): told by the caller,
    since this package imports none of the project's others."""
    global _known
    _known = _known | {_folded(name) for name in names if " " in name.strip()}


def known_names() -> frozenset[str]:
    return _known


def _folded(name: str) -> str:
    return " ".join(name.split()).casefold()


def found_in(text: str) -> list[Found]:
    """Each stretch of ``text`` that identifies a person, in order, none overlapping."""
    found: list[Found] = []
    if "@" in text:
        found += [Found(*match.span(), "email") for match in EMAIL.finditer(text)]
    long_number = _LONG_NUMBER.search(text) is not None
    if long_number:
        found += _cards(text)
    found += _addresses(text)
    if long_number:
        found += _phones(text)
    found += _names(text)
    return _without_overlaps(found)


def redacted(text: str) -> str:
    """``text`` with each stretch that identifies a person replaced by ``[redacted <kind>]``."""
    pieces, last = [], 0
    for each in found_in(text):
        pieces += [text[last : each.start], f"[redacted {each.kind}]"]
        last = each.end
    return "".join(pieces) + text[last:] if pieces else text


def _without_overlaps(found: list[Found]) -> list[Found]:
    """The earlier-listed kind keeps characters claimed twice (found is in the kinds' order)."""
    kept: list[Found] = []
    for each in found:
        if all(each.end <= other.start or each.start >= other.end for other in kept):
            kept.append(each)
    return sorted(kept, key=lambda each: each.start)


def _luhn(digits: str) -> bool:
    # The Luhn checksum is four lines; a library for it would be a dependency for less than this.
    total = 0
    for position, digit in enumerate(reversed(digits)):
        value = int(digit) * (2 if position % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def _cards(text: str) -> list[Found]:
    return [
        Found(*match.span(), "card")
        for match in _CARD.finditer(text)
        if _luhn(re.sub(r"\D", "", match.group()))
    ]


def _phones(text: str) -> list[Found]:
    # Imported here, at the first text holding a long run of digits (``found_in``), not at the top:
    # it takes 50 to 60 ms, most of it building its matcher's patterns, and the story query's spans
    # never hold such a run. This package imports no other of the project's (``sources.deferred``).
    import phonenumbers

    # POSSIBLE, not VALID: the numbers set aside for fiction and tests (07700 900123, 555-0132) are
    # people's numbers in a question all the same; the digit count keeps ids and dates out.
    matcher = phonenumbers.PhoneNumberMatcher(text, "GB", leniency=phonenumbers.Leniency.POSSIBLE)
    return [
        Found(match.start, match.end, "phone")
        for match in matcher
        if sum(char.isdigit() for char in match.raw_string) >= _PHONE_DIGITS
    ]


def _addresses(text: str) -> list[Found]:
    postcodes = list(_POSTCODE.finditer(text))
    found = []
    for street in _STREET.finditer(text):
        end = street.end()
        between = _BETWEEN_STREET_AND_POSTCODE.match(text, end)
        after = between.end() if between else end
        for postcode in postcodes:
            if end <= postcode.start() <= after:
                end = postcode.end()
                break
        found.append(Found(street.start(), end, "address"))
    return found + [Found(*postcode.span(), "address") for postcode in postcodes]


def _names(text: str) -> list[Found]:
    found = [Found(*match.span(), "name") for match in _TITLED.finditer(text)]
    found += [Found(*match.span("name"), "name") for match in _CUED.finditer(text)]
    if _known:
        for run in _NAME_RUN.finditer(text):
            found += _known_in(run.group(), run.start())
    return found


def _known_in(run: str, offset: int) -> list[Found]:
    """Registered names among a run of capitalised words: two or three words in a row, longest first."""
    words = [(match.start(), match.end()) for match in re.finditer(_WORD, run)]
    found, index = [], 0
    while index < len(words):
        for size in (3, 2):
            if index + size <= len(words):
                start, end = words[index][0], words[index + size - 1][1]
                if _folded(run[start:end]) in _known:
                    found.append(Found(offset + start, offset + end, "name"))
                    index += size - 1
                    break
        index += 1
    return found
