"""What a clause asks, by meaning: the offline semantic matcher behind the planner's keywords.

Keywords (``coordinator.intents``) are the exact, fast path. A clause that asks something in words
they do not know ("has she reached out to us", "a goodwill gesture") is compared here with every example
of every intent (``intents.EXAMPLES``): the whole clause, and each run of one to four of its words that
holds a word the keywords left unexplained (so "been in touch" is found inside "has Yvonne been in
touch about her espresso machine", and "what's the" alone never matches anything). The intent of the
nearest example is taken only when it is at least ``THRESHOLD`` similar; below it the clause is *not
understood*, never guessed.

The embeddings are WordLlama's (``wordllama``): static token embeddings whose weights and tokenizer
ship inside its wheel (19 MB), loaded with no network in about 0.2 s and about 0.1 ms a clause. It is
imported only when a clause needs it, so ``research --help``, usage errors and queries the keywords
read whole never load it. Why this library and this threshold: README, "How the planner reads".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from coordinator.intents import EXAMPLE_TOPICS, EXAMPLES

__all__ = ["THRESHOLD", "Match", "nearest_intent"]

# Cosine similarity from which the nearest example's intent is taken. Chosen on the calibration in
# tests/test_meaning.py: every example of an intent, left out in turn, is matched to its own intent
# at or above it, and no clause of the non-asks set (other languages, code, emoji, small talk, fields
# no source holds) reaches it.
THRESHOLD = 0.6

_READABLE = re.compile(r"[A-Za-z]")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class Match:
    """The intent nearest to a clause, the example it is nearest to, and how near (cosine, -1 to 1)."""

    intent: str
    example: str
    score: float

    @property
    def topics(self) -> tuple[str, ...]:
        """The search words the example stands for ("send it back" is about returns)."""
        return EXAMPLE_TOPICS.get(self.example, ())

    @property
    def understood(self) -> bool:
        return self.score >= THRESHOLD


@functools.cache
def _model() -> Any:
    from pathlib import Path

    import wordllama

    # The package's own folder holds its weights and tokenizer; its default load() looks elsewhere and
    # would try a download.
    return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


@functools.cache
def _examples() -> tuple[tuple[tuple[str, str], ...], Any]:
    pairs = tuple((intent, example) for intent, examples in EXAMPLES.items() for example in examples)
    # Embedded as a clause is (the same words, lower case, no punctuation), so an example meets itself.
    return pairs, _model().embed(
        [" ".join(_WORD.findall(example.lower())) for _, example in pairs], norm=True
    )


_LONGEST = 4  # words in a run compared on its own


def nearest_intent(text: str, unexplained: Collection[str]) -> Match | None:
    """The intent whose example is nearest to ``text`` or to a run of its words holding one of
    ``unexplained``; None when it holds no word the model reads."""
    words = _WORD.findall(text.lower())
    if not _READABLE.search(text) or not words:
        return None  # emoji, digits, another script: nothing to compare
    marked = [word in unexplained for word in words]
    candidates = [" ".join(words)]
    for size in range(1, _LONGEST + 1):
        candidates += [
            " ".join(words[at : at + size])
            for at in range(len(words) - size + 1)
            if any(marked[at : at + size])
        ]
    pairs, matrix = _examples()
    scores = _model().embed(candidates, norm=True) @ matrix.T
    best_candidate, best = divmod(int(scores.argmax()), scores.shape[1])
    intent, example = pairs[best]
    return Match(intent, example, round(float(scores[best_candidate, best]), 3))
