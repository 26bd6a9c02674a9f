"""What a clause asks, by meaning: the offline semantic matcher behind the planner's keywords.

Keywords (``coordinator.planning.intents``) are the exact, fast path. A clause that asks something in words
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
import logging
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator.planning.lexicon import EXAMPLE_TOPICS, EXAMPLES, STOPWORDS, TOKEN
from sources.deferred import deferred

if TYPE_CHECKING:
    import numpy as np
    import wordllama
else:
    np = deferred("numpy")
    wordllama = deferred("wordllama")  # its code runs in _model, which puts the root logger back after it

__all__ = ["THRESHOLD", "Match", "nearest_intent"]

# Cosine similarity from which the nearest example's intent is taken. Chosen on the calibration in
# tests/test_meaning.py: every example of an intent, left out in turn, is matched to its own intent
# at or above it, and no clause of the non-asks set (other languages, code, emoji, small talk, fields
# no source holds) reaches it.
THRESHOLD = 0.6

_READABLE = re.compile(r"[A-Za-z]")


@dataclass(frozen=True)
class Match:
    """The intent nearest to a clause, the example it is nearest to, and how near (cosine, -1 to 1)."""

    intent: str
    example: str
    score: float
    # One of the clause's unexplained words is near one of the example's own words ("touch" and
    # "been in touch"); a match through function words alone ("happy with us", "called us") is not.
    supported: bool = True

    @property
    def topics(self) -> tuple[str, ...]:
        """The search words the example stands for ("send it back" is about returns)."""
        return EXAMPLE_TOPICS.get(self.example, ())

    @property
    def understood(self) -> bool:
        return self.supported and self.score >= THRESHOLD


@functools.cache
def _model() -> Any:
    # Importing wordllama calls logging.basicConfig(level=INFO): the root logger would then print
    # every library's INFO lines (each HTTP request of the SDKs) on stderr. Put the root back as it was.
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    model = wordllama.WordLlama  # the first attribute read: wordllama's code runs here

    root.setLevel(level)
    for handler in [handler for handler in root.handlers if handler not in handlers]:
        root.removeHandler(handler)

    # The package's own folder holds its weights and tokenizer; its default load() looks elsewhere and
    # would try a download.
    return model.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


@functools.cache
def _examples() -> tuple[tuple[tuple[str, str], ...], Any]:
    pairs = tuple((intent, example) for intent, examples in EXAMPLES.items() for example in examples)
    # Embedded as a clause is (the same words, lower case, no punctuation), so an example meets itself.
    return pairs, _model().embed(
        [" ".join(TOKEN.findall(example.lower())) for _, example in pairs], norm=True
    )


@functools.cache
def _example_words() -> tuple[list[str], Any, list[list[int]]]:
    """Each example's content words (not function words), embedded one by one: the distinct words,
    their vectors, and for each example the indices of its words."""
    pairs, _ = _examples()
    content = [_meaning_words(TOKEN.findall(example.lower()), STOPWORDS) for _, example in pairs]
    distinct = sorted({word for words in content for word in words})
    at = {word: index for index, word in enumerate(distinct)}
    return distinct, _model().embed(distinct, norm=True), [[at[w] for w in words] for words in content]


def _meaning_words(words: list[str], function_words: Collection[str]) -> list[str]:
    """The words of an example that carry its meaning: not function words, and not the word that makes
    "how" a question of measure ("how long", "how soon"), which any question of time or amount shares."""
    return [w for i, w in enumerate(words) if w not in function_words and (i == 0 or words[i - 1] != "how")]


def _supported(unexplained: Collection[str]) -> Any:
    """For each example, whether one of its content words is near one of the clause's unexplained
    words: "been in touch" for "touch", "rang us" for "ring". A clause matched through its function
    words alone ("happy with us" to "called us") is not."""
    _, vectors, indices = _example_words()
    if not unexplained:
        return np.zeros(len(indices), dtype=bool)
    near = (_model().embed(sorted(set(unexplained)), norm=True) @ vectors.T).max(axis=0) >= _WORD_SUPPORT
    return np.array([bool(words) and bool(near[words].any()) for words in indices])


_LONGEST = 4  # words in a run compared on its own
# How near (cosine) an unexplained word must be to a content word of the example it matched: the
# asks of tests/test_meaning.py are at 0.57 and above, function-word matches near 0.
_WORD_SUPPORT = 0.5


def nearest_intent(text: str, unexplained: Collection[str]) -> Match | None:
    """The intent whose example is nearest to ``text`` or to a run of its words holding one of
    ``unexplained``; None when it holds no word the model reads."""
    words = TOKEN.findall(text.lower())
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
    supported = _supported(unexplained)
    if supported.any():
        scores[:, ~supported] = -1.0  # the nearest example that shares a meaning word with the clause
    best_candidate, best = divmod(int(scores.argmax()), scores.shape[1])
    intent, example = pairs[best]
    return Match(intent, example, round(float(scores[best_candidate, best]), 3), bool(supported.any()))
