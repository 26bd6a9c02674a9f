"""Whether a word is English: the word list behind typo correction and the reading of other languages.

A word the planner's own vocabulary lacks is either English it need not know ("chipped", "furious"),
a typo of a word it knows ("cancelld", "tikets") or of another English word ("diference"), or not
English at all ("archeb", "commande"). The list is pyspellchecker's English word frequencies (about
160,000 words, shipped inside its wheel and read with no network in about 0.2 s), loaded only when a
query holds a word the vocabulary lacks. The planner's function words are in it (all but
``NOT_IN_THE_LIST``, held by tests/test_english.py): asked of one ("whether", "a"), the answer is
known without loading the list.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from coordinator.planning.lexicon import STOPWORDS
from sources.deferred import deferred

if TYPE_CHECKING:
    import spellchecker
else:
    spellchecker = deferred("spellchecker")

__all__ = ["NOT_IN_THE_LIST", "correct", "in_the_list", "is_english"]

# The planner's function words the word list lacks: spellings without an apostrophe, shorthand, dialect.
NOT_IN_THE_LIST = frozenset({"im", "is's", "pls", "plz", "tha", "theres"})
_LISTED_FUNCTION_WORDS = STOPWORDS - NOT_IN_THE_LIST


@functools.cache
def _checker() -> Any:
    return spellchecker.SpellChecker(language="en", distance=1)


# The list spells as Americans do: a British spelling is read in that form ("authorised",
# "colour", "centre", "travelled", "analyse").
_BRITISH = ((r"is(e|ed|es|ing|ation|ations)$", r"iz\1"), (r"our", "or"), (r"tre$", "ter"),
            (r"ll(ed|ing|er)$", r"l\1"), (r"yse(d|s)?$", r"yze\1"), (r"ogue$", "og"))  # fmt: skip


def is_english(word: str) -> bool:
    """Whether ``word`` (lower case) is in the English word list, spelled either side of the Atlantic."""
    return word in _LISTED_FUNCTION_WORDS or in_the_list(word)


def in_the_list(word: str) -> bool:
    """``is_english`` asked of the list itself."""
    counts = _checker().word_frequency
    return bool(counts[word]) or any(
        bool(counts[re.sub(pattern, spelled, word)])
        for pattern, spelled in _BRITISH
        if re.search(pattern, word)
    )


def correct(word: str) -> str | None:
    """The English word ``word`` is one slip from ("diference": "difference"), or None."""
    found = _checker().correction(word)
    return found if isinstance(found, str) and found != word and is_english(found) else None
