"""Amounts as people say them: read as pounds, or set aside as not understood, never misread.

    digits          £45, 45 GBP, GBP 45.00, 45.00GBP, £ 45, £1,250.50, 45 pounds, 45 quid   -> 45.0 ...
    a decimal comma £12,50, 2,5 pounds (one or two digits after a comma: no thousands group)  -> 12.5, 2.5
    thousands       £1.2k, 1k GBP, refund 1.2k                                              -> 1200.0
    a count         2 x £39 (two at a unit price)                                           -> 78.0
    pence           45p, 45 pence                                                           -> 0.45
    words           forty-five quid, one hundred and twenty pounds fifty, a fiver, half a grand
    prices          four ninety-nine, twelve fifty (pounds then pence, where money is asked back)

A number is read whole or not at all: "£1.299" and "£45.999" are no amount of pounds and pence, so
they are set aside with why (``UNREAD_AFTER``), never read as £1.29 or £45.99; so is a range
("£45-£50"), which a refund check cannot take (``UNREAD_BEFORE``). Two amounts offered for one ("£45
or £50") are both read: the plan checks one and lists the other as not placed. The part of an amount
said ("in full", "the whole lot", "half", "a third") is ``share_said``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from coordinator.planning.lexicon import (
    COUNT_WORDS,
    FULL_AMOUNT_PHRASES,
    MONEY_WORDS,
    NUMBER_WORDS,
    REFUND_AMOUNT_LEAD_INS,
    SHARE_WORDS,
    WHOLE_OF_AN_ORDER,
)
from sources.deferred import deferred

if TYPE_CHECKING:
    import text_to_num
else:
    text_to_num = deferred("text_to_num")  # only a query with a number in words needs it

__all__ = [
    "COUNT",
    "FULL_AMOUNT",
    "IN_POUNDS",
    "SAY_ONE_AMOUNT",
    "UNREAD_AFTER",
    "UNREAD_BEFORE",
    "count",
    "in_words",
    "share_said",
    "shares_said",
]

# A number of pounds: digits grouped by thousands, or a decimal point or comma and one or two digits of
# pence, then perhaps "k" (thousands). It never starts or ends inside more digits ("£1.299" is not £1.29).
_NUMBER = r"(?<![\d.,])(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d{1,2})?|\d+(?:[.,]\d{1,2})?)(?:\s?(?P<k>k)\b)?(?![.,]?\d)"
_UNIT = r"(?:GBP|pounds?(?:\s+sterling)?|quid|sterling)"
_LEAD_INS = "|".join(phrase.replace(" ", r"\s+") for phrase in REFUND_AMOUNT_LEAD_INS)
_LEAD_IN = rf"\b(?:{_LEAD_INS})\s+(?:of\s+|for\s+)?"
# Counts as written in a sentence: a digit, or a word of ``COUNT_WORDS``.
COUNT = rf"(?:\d+|{'|'.join(COUNT_WORDS)})"
_IN_WORDS = rf"(?:{'|'.join(NUMBER_WORDS)})(?:[\s-]+(?:and[\s-]+)?(?:{'|'.join(NUMBER_WORDS)}))*"
# "four ninety-nine": pounds in words, then two-digit pence ("ninety-nine", "fifty", "twelve").
_TENS = "twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
_TEENS = "ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen"
_PENCE_IN_WORDS = rf"(?:(?:{_TENS})(?:[\s-](?:one|two|three|four|five|six|seven|eight|nine))?|{_TEENS})"
_PRICE = rf"(?P<pounds>{_IN_WORDS})\s+(?P<pence>{_PENCE_IN_WORDS})"


def _pounds(match: re.Match[str]) -> float:
    value = float(match["number"].replace(",", "") if "." in match["number"] else _decimal(match["number"]))
    return round(value * 1000, 2) if match["k"] else value


def _times(match: re.Match[str]) -> float:
    """ "2 x £39" is 78: the count times the unit price."""
    return round(count(match["count"]) * _pounds(match), 2)


def _decimal(number: str) -> str:
    """ "1,250" groups thousands; "12,50" has a decimal comma (one or two digits after it)."""
    whole, _, after = number.partition(",")
    return f"{whole}.{after}" if after and len(after) < 3 and "," not in after else number.replace(",", "")


def in_words(words: str) -> float | None:
    try:
        return float(text_to_num.text2num(" ".join(words.lower().replace("-", " ").split()), "en"))
    except ValueError:
        return None


def _pounds_in_words(match: re.Match[str]) -> float | None:
    """ "twelve pounds fifty" is 12.50; "sixty-four quid" is 64."""
    pounds = in_words(match["words"])
    pence = in_words(match["pence"]) if match["pence"] else 0.0
    if pounds is None or pence is None or pence >= 100:
        return pounds
    return pounds + pence / 100


def _price(match: re.Match[str]) -> float | None:
    """ "four ninety-nine" is 4.99: pounds in words, then the pence."""
    pounds, pence = in_words(match["pounds"]), in_words(match["pence"])
    return None if pounds is None or pence is None else round(pounds + pence / 100, 2)


def count(word: str) -> int:
    return int(word) if word.isdigit() else COUNT_WORDS[word.lower()]


def _money_word(match: re.Match[str]) -> float:
    half = 0.5 if match["half"] else 1  # "half a grand"
    return half * count(match["count"]) * MONEY_WORDS[match["word"].lower()]


def _pence(match: re.Match[str]) -> float:
    return int(match["number"]) / 100


_NOT_MONEY_AFTER = r"(?!\s*(?:%|days?|weeks?|months?|years?|items?|x|of|orders?)\b)"
# Each way an amount in pounds is written, and how its value is read, in the order they are read.
IN_POUNDS = (
    # "2 x £39": a count of things at a unit price, the amount their price makes together
    (re.compile(rf"\b(?P<count>{COUNT})\s?[x×*]\s?£\s?{_NUMBER}", re.I), _times),
    (re.compile(rf"£\s?{_NUMBER}"), _pounds),
    (re.compile(rf"\bGBP\s?{_NUMBER}", re.I), _pounds),
    (re.compile(rf"\b{_NUMBER}\s?{_UNIT}\b", re.I), _pounds),
    (re.compile(r"\b(?P<number>\d{1,2})\s?(?:p|pence)\b", re.I), _pence),
    # A bare number right after a refund word is an amount in pounds ("refund 45 on ORD-10031"); only
    # the number is taken, so the refund word is still read.
    (re.compile(rf"{_LEAD_IN}(?P<span>{_NUMBER}){_NOT_MONEY_AFTER}", re.I), _pounds),
    (
        re.compile(
            rf"\b(?:a\s+)?(?P<words>{_IN_WORDS})\s+{_UNIT}"
            rf"(?:\s+(?:and\s+)?(?P<pence>{_IN_WORDS})(?:\s+p(?:ence)?)?)?\b",
            re.I,
        ),
        _pounds_in_words,
    ),
    # A price in words where money is asked back: "refund twelve fifty", "four ninety-nine back".
    (re.compile(rf"{_LEAD_IN}(?P<span>{_PRICE})\b{_NOT_MONEY_AFTER}", re.I), _price),
    (re.compile(rf"\b(?P<span>{_PRICE})\s+back\b", re.I), _price),
    (
        re.compile(
            rf"\b(?:(?P<half>half)\s+)?(?P<count>{COUNT})\s+(?P<word>{'|'.join(MONEY_WORDS)})\b"
            r"(?!\s+(?:of|on)\s+(?:the\s+)?(?:orders?|items?|people|customers?|tickets?)\b)",
            re.I,
        ),
        _money_word,
    ),
)

# What looks like an amount and is not one amount of pounds and pence: set aside, whole as typed, with
# why; a range is read before the amounts, what is left of one after them.
_DIGITS = r"\d[\d.,]*k?"
_MARKED = rf"(?:£\s?{_DIGITS}|\bGBP\s?{_DIGITS})"
UNREAD_BEFORE = (
    (
        re.compile(
            rf"{_MARKED}\s?(?:-|–|to)\s?£?\s?{_DIGITS}|\b{_DIGITS}\s?(?:-|–|to)\s?{_DIGITS}\s?{_UNIT}\b", re.I
        ),
        "a range of amounts, and a refund check takes one",
    ),
)
UNREAD_AFTER = (
    (
        re.compile(rf"{_MARKED}|\b{_DIGITS}\s?{_UNIT}\b|{_LEAD_IN}(?P<span>\d+[.,][\d.,]*\d)\b", re.I),
        "not an amount in pounds and pence as written (at most two digits of pence, thousands in threes)",
    ),
)
# What to write instead of an amount set aside.
SAY_ONE_AMOUNT = "say one amount in pounds and pence, e.g. 'refund £45.50 on ORD-10031'"

# --- the part of an amount asked: all of it, or a share --------------------------------------------

# "In full", "the whole lot": the whole of what was paid (reading, writes); "the whole £750" too (rounds).
FULL_AMOUNT = re.compile(rf"\b(?:{'|'.join(re.escape(p) for p in FULL_AMOUNT_PHRASES)})(?!\w)", re.I)
# "the whole £750", "her entire espresso machine order": said of an order a later round finds (rounds).
_WHOLE = re.compile(rf"\b(?:{'|'.join(WHOLE_OF_AN_ORDER)})\b", re.I)
_SHARES = tuple(
    (re.compile(rf"\b{'[ -]'.join(said.split())}s?\b", re.I), part)
    for said, part in sorted(SHARE_WORDS.items(), key=lambda item: -len(item[0]))
)


def share_said(text: str) -> float | None:
    """The part of an amount ``text`` asks: 1.0 for all of it ("in full", "the whole £750"), a share
    ("half", "a third", "two thirds"), or None."""
    if FULL_AMOUNT.search(text) or _WHOLE.search(text):
        return 1.0
    return next((part for said, part in _SHARES if said.search(text)), None)


def shares_said() -> tuple[re.Pattern[str], ...]:
    """The patterns of every part of an amount (what the accounting counts as read)."""
    return (FULL_AMOUNT, _WHOLE, *(said for said, _ in _SHARES))
