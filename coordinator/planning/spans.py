"""A query as spans, each with a role: what asks, what tells a story, what is only courtesy.

The reader (``coordinator.planning.reading``) finds what a query names (ids, emails, amounts, dates, names)
and blanks each; what is left is cut here into spans at the structure people write: sentences, then
clauses (commas, dashes, "and", "but", and after a thing named, so "refund £45 on ORD-10031 the jug
came twice" is an ask and a story). Each span's role is decided by its structure, not by its topic:

- ``asks``: a question (a "?" or a question word first), a request ("pls", "can you", an imperative),
  or a fragment that says neither (support shorthand: "jane doe orders since september");
- ``story``: a statement told by someone ("we moved house in September", "customer says...") or in
  the past ("the jug came twice"): context, whose dates qualify nothing;
- ``courtesy``: greetings, sign-offs, thanks and filler.

The planner (``coordinator.planning.planner``) accounts for every word of every ``asks`` span after planning:
each is used by a task, or is listed as not understood or as something no source holds.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from coordinator.planning.english import is_english
from coordinator.planning.lexicon import (
    COURTESY_WORDS,
    DETERMINERS,
    GREETINGS,
    IRREGULAR_PAST,
    JOINING,
    JOINT_PARTS,
    JOINTS,
    MOOD_FILLERS,
    PEOPLE,
    POSSESSIVES,
    QUESTION_WORDS,
    REQUEST_WORDS,
    SIGN_OFF_WORDS,
    STOPWORDS,
    STORY_OPENERS,
    TOKEN,
    WHAT_WORDS,
)

if TYPE_CHECKING:
    from coordinator.planning.meaning import Match

__all__ = [
    "ASKS",
    "COURTESY",
    "STORY",
    "Span",
    "Token",
    "asks_for_a_thing",
    "clauses",
    "cut",
    "possessed",
    "quantity",
    "sentences",
]

ASKS, STORY, COURTESY = "asks", "story", "courtesy"

# Where a clause ends: sentence ends, line breaks, commas, dashes and colons, brackets, and the words
# that join two asks ("orders and tickets", "refund it but check the policy").
# "+", "&" and list markers ("1)", "(b)") join asks as commas do.
_BREAK = re.compile(
    r"[.!?;]+(?=\s|$)|\n|,|\s[-–—]+\s|:(?=\s)|[()\[\]]|\s[+&]\s|(?<!\S)\d\)(?=\s)"
    r"|\b(?:and|but|also|plus|then|btw|so|as\s+well\s+as|along\s+with|together\s+with|not\s+to\s+mention)\b",
    re.I,
)


@dataclass(frozen=True)
class Token:
    """A word of a span: as read (lower case, typos corrected), where it starts, and as written."""

    word: str
    start: int
    written: str


@dataclass(frozen=True)
class Span:
    """A clause of the query: where it is, its words, and its role; an ask's reading by meaning."""

    start: int
    end: int
    text: str  # as written
    role: str
    tokens: tuple[Token, ...]
    names: bool  # holds something named (an id, an email, an amount, a date, a person)
    question: bool  # asked as a question ("what is...", "...?")
    request: bool = False  # asked as a request ("pls", "can you", "I'd like"), or as a question
    # It names things asked for: a what/which question, a clause after a possessive ("jane's phone
    # number"), or one listed after such a clause ("... and delivery address").
    things: bool = False
    asked: frozenset[str] = frozenset()  # the intents its keywords ask (words, phrases, phrasal verbs)
    match: Match | None = None  # the semantic matcher's reading, where keywords left words unexplained
    # what the reader does not read: words in another script or language, symbols, code ("これは何ですか",
    # "🙃", "fy archeb wedi torri"), each part as written
    unread: tuple[str, ...] = ()
    # It goes on from the clause before, cut only where a thing named ended ("KB-DAMAGED | related
    # articles"), not at a comma or an "and".
    goes_on: bool = False

    @property
    def content(self) -> tuple[Token, ...]:
        """The words that carry meaning: not function words, not courtesy."""
        return tuple(t for t in self.tokens if t.word not in STOPWORDS and t.word not in COURTESY_WORDS)


def cut(
    text: str, left: str, named: list[tuple[int, int]], correct: dict[str, str], known: frozenset[str]
) -> list[Span]:
    """``text`` as spans: ``left`` is ``text`` with what it names blanked, ``named`` those blanks'
    (start, end), ``correct`` each word as read (typos corrected), and ``known`` the words of what
    sources hold ("ordered", "placed", "delivered": record talk, never a story's past)."""
    cuts = {0, len(text)}
    for found in _BREAK.finditer(left):
        cuts.update((found.start(), found.end()))
    broken = set(cuts)
    for _, end in named:  # a thing named closes its clause: what follows it is a clause of its own
        end += 2 if text[end : end + 2].lower() == "'s" else 0  # "jane's phone": the possessive is the name's
        following = TOKEN.search(left.lower(), end)
        if following and not left[end : following.start()].strip() and following[0] not in JOINING:
            cuts.add(end)
    possessive = {end + 2 for _, end in named if text[end : end + 2].lower() == "'s"}
    starts = sorted(start for start, _ in named)

    def names_in(start: int, end: int) -> bool:
        at = bisect.bisect_left(starts, start)
        return at < len(starts) and starts[at] < end

    bounds = sorted(cuts)
    spans: list[Span] = []
    for start, end in itertools.pairwise(bounds):
        written = text[start:end].strip(" \t,;:-–—()[]")
        if not written.strip(".!?") and not names_in(start, end):
            continue
        tokens = tuple(
            Token(correct.get(found[0].removesuffix("'s"), found[0].removesuffix("'s")), start + found.start(), found[0])
            for found in TOKEN.finditer(left[start:end].lower())
        )  # fmt: skip
        names = names_in(start, end)
        if not names and not _unread(left[start:end]) and _joint(tokens, text[end : end + 1] == "?"):
            continue  # "and", "so": the joint between two clauses
        # A past form right before a thing named qualifies it ("tickets logged since 2026-06-01").
        qualifiers = {t.word for t in tokens if _before_named(text, t, starts)}
        span = _span(text, start, end, written, tokens, names, known | qualifiers)
        unread = tuple(part for part in (_unread(left[start:end]), _foreign(tokens, known)) if part)
        span = replace(span, unread=unread)
        listed = bool(spans) and spans[-1].things and not re.search(r"[.!?;\n]", text[spans[-1].end : start])
        if start in possessive or listed or (tokens and tokens[0].word in WHAT_WORDS):
            span = replace(span, things=True)
        if spans and start not in broken and not text[spans[-1].end : start].strip(" \t'"):
            span = replace(span, goes_on=True)
        spans.append(span)
    return _pasted_letter(_questions_run_on(spans, text), text)


def _a_mood(words: list[str], names: bool, question: bool, known: frozenset[str]) -> bool:
    """Whether a clause only says how someone feels ("cx moaning", "customer furious", "pls, she's
    really upset"): a person, then one word the sources know nothing of, at most a courtesy between."""
    said = [word for word in words if word not in MOOD_FILLERS]
    return (
        not names
        and not question
        and len(said) == 2
        and said[0] in PEOPLE
        and said[1] not in known
        and said[1] not in STOPWORDS
    )


def _joint(tokens: tuple[Token, ...], asked: bool) -> bool:
    """Whether a clause is only the joint between two others ("and", "so then"); a question of
    function words is not ("what can we do for her?")."""
    if all(token.word in JOINTS or token.word in JOINT_PARTS for token in tokens):
        return True
    return (
        not asked
        and len(tokens) <= 2
        and all(t.word in STOPWORDS and t.word not in COURTESY_WORDS for t in tokens)
    )


def _span(
    text: str,
    start: int,
    end: int,
    written: str,
    tokens: tuple[Token, ...],
    names: bool,
    known: frozenset[str],
) -> Span:
    words = [t.word for t in tokens]
    content = [w for w in words if w not in STOPWORDS and w not in COURTESY_WORDS]
    rest = text[end:].lstrip()
    # "whether she is happy with us", "if it was bought as a gift": a question asked inside another
    asked = bool(words) and (words[0] in QUESTION_WORDS or words[0] in {"whether", "if"})
    question = written.endswith("?") or rest.startswith("?") or asked
    request = question or any(w in REQUEST_WORDS for w in words)
    greeting = bool(words) and words[0] in GREETINGS and len(words) <= 4 and not question
    if (not content and not names and not question and not _unread(text[start:end])) or (
        greeting and not request
    ):
        role = COURTESY  # "Dear Coffee Co", "Hi team": whom a letter is to
    elif _a_mood(words, names, question, known):
        role = STORY  # "pls cx moaning", "customer furious": how they feel, not what to look up
    elif request:
        role = ASKS
    elif words and (words[0] in STORY_OPENERS or any(_past(w) for w in words if w not in known)):
        # A past form of a word the sources know qualifies what was named ("tickets raised after",
        # "orders placed in"); any other tells what happened ("the jug came twice").
        role = STORY
    else:
        role = ASKS  # a fragment: shorthand asks by naming
    return Span(start, end, written, role, tokens, names, question, request=request)


# A pasted email's header lines ("From: ...", "Subject: ..."): context.
_HEADER = re.compile(
    r"^[ \t>]*(?:(?:from|to|cc|subject|sent|date|re)\s*:|-*\s*(?:forwarded|original)\s+message\b"
    r"|begin\s+forwarded\s+message)",
    re.I | re.M,
)
# A pasted chat's turns by the agent ("Agent: can I take the order number?" beside "Customer: ..."
# turns): what was said, not asked. An "agent:" note after a pasted letter is the ask itself.
_AGENT_TURN = re.compile(r"^[ \t>]*(?:agent|support|advisor|adviser|rep|operator)\s*:", re.I | re.M)
_CUSTOMER_TURN = re.compile(r"^[ \t>]*(?:customer|cx|caller|client)\s*:", re.I | re.M)


def _pasted_letter(spans: list[Span], text: str) -> list[Span]:
    """A pasted email with the agent's ask after it: the letter (up to its sign-off and the signature
    after it) is the customer's story; only what follows asks. Its header lines are context."""
    headers = [
        (found.start(), text.find("\n", found.start()) % (len(text) + 1)) for found in _HEADER.finditer(text)
    ]
    chat = _CUSTOMER_TURN.search(text) is not None
    turns = [
        (found.start(), text.find("\n", found.start()) % (len(text) + 1))
        for found in (_AGENT_TURN.finditer(text) if chat else ())
    ]
    spans = [
        replace(span, role=COURTESY)
        if any(start <= span.start < end for start, end in headers)
        else replace(span, role=STORY)
        if any(start <= span.start < end for start, end in turns)
        else span
        for span in spans
    ]
    sign_offs = [
        index
        for index, span in enumerate(spans)
        if span.role == COURTESY and {t.word for t in span.tokens} & SIGN_OFF_WORDS
    ]
    if not sign_offs:
        # An email pasted whole (its header lines say so): what its writer states is their story; what
        # they ask ("I want a refund in full") still asks.
        return [_told_unless_asked(span) for span in spans] if headers else spans
    last = sign_offs[-1]
    after = spans[last + 1 :]
    # The signature: the short lines right after the sign-off, up to a blank line ("Thanks,\nJane Doe\n
    # jane@example.com").
    blank = re.compile(r"\n[ \t]*\n").search(text, spans[last].end)
    signed_until = blank.start() if blank else len(text)
    signature = [
        i
        for i, span in enumerate(after)
        if span.start < signed_until and len(span.tokens) <= 4 and not span.question
    ]
    asks = [span for i, span in enumerate(after) if i not in signature and span.role == ASKS]
    if not asks:
        return spans
    # What the letter asks itself ("I'd like the £40.50 refunded please", "did my orders go out?")
    # still asks; the rest of it is the customer's story.
    letter = [_told_unless_asked(span) for span in spans[:last]]
    tail = [replace(span, role=COURTESY) if i in signature else span for i, span in enumerate(after)]
    return [*letter, spans[last], *tail]


def _told_unless_asked(span: Span) -> Span:
    """A span of a customer's letter: a question or a request asks, anything else is their story."""
    return replace(span, role=STORY) if span.role == ASKS and not (span.question or span.request) else span


_SENTENCE_END = re.compile(r"[.!?;]+(?=\s|$)|\n")


def clauses(spans: list[Span]) -> list[list[int]]:
    """The spans (indices) grouped into clauses: those cut only where a thing named ended taken back
    together ("KB-DAMAGED | related articles" is one clause, "kb-damaged and the shipping policy" two)."""
    groups: list[list[int]] = []
    for index, span in enumerate(spans):
        if not groups or not span.goes_on:
            groups.append([])
        groups[-1].append(index)
    return groups


def sentences(spans: list[Span], text: str) -> list[list[int]]:
    """The spans grouped into sentences (indices, in order): a new one after a full stop, a question
    or exclamation mark, a semicolon or a line break; never at the dot of "9.99" or of an email."""
    groups: list[list[int]] = []
    for index, span in enumerate(spans):
        # up to the span's first character (+1): the lookaheads see on
        if not groups or _SENTENCE_END.search(text[spans[index - 1].start : span.start + 1]):
            groups.append([])
        groups[-1].append(index)
    return groups


def _before_named(text: str, token: Token, starts: list[int]) -> bool:
    """Whether a thing named (``starts``, sorted) begins right after ``token``."""
    after = token.start + len(token.written)
    while after < len(text) and text[after] in " \t":
        after += 1
    at = bisect.bisect_left(starts, after)
    return at < len(starts) and starts[at] == after


# Code or data pasted into a question: a JSON object, a tag, a backquoted snippet.
_CODE = re.compile(r"\{[^{}]*\}|<[^<>\s][^<>]*>|`[^`]+`")
# A word with a letter outside ASCII: another language ("vérifiez", "días"), or another script.
_FOREIGN_WORD = re.compile(r"[^\W\d_]*[^\x00-\x7f\W\d_][^\W\d_]*")


def _unread(text: str) -> str:
    """What of ``text`` the reader cannot read: words of another language or script, code or data
    pasted in, and emoji or other symbols where they stand alone (beside words, "refund policy 🙏" is
    tone, not an ask)."""
    found = [match[0] for match in _CODE.finditer(text)]
    found += [match[0] for match in _FOREIGN_WORD.finditer(_CODE.sub(" ", text))]
    if not re.search(r"[A-Za-z0-9]", text):
        found += [char for char in text if unicodedata.category(char) == "So"]
    return " ".join(found)


def _foreign(tokens: tuple[Token, ...], known: frozenset[str]) -> str:
    """Words of another language written in English letters ("mae fy archeb wedi torri"): two or more
    neighbours that are neither English, nor a word the planner knows, nor a typo of one."""

    def unknown(token: Token) -> bool:
        word = token.word
        return (
            len(word) > 2
            and token.written.lower().removesuffix("'s") == word  # a typo corrected is English meant
            and word not in known
            and word not in STOPWORDS
            and word not in COURTESY_WORDS
        )

    runs: list[list[Token]] = []
    for index, token in enumerate(tokens):
        if not unknown(token):
            continue
        if runs and tokens[index - 1] is runs[-1][-1]:
            runs[-1].append(token)
        else:
            runs.append([token])
    # the word list is asked only of neighbours the planner does not know
    foreign: list[list[Token]] = []
    for run in runs:
        if len(run) < 2:
            continue
        foreign.append([])
        for token in run:
            if is_english(token.word):
                foreign.append([])
            else:
                foreign[-1].append(token)
    return " ".join(token.written for run in foreign if len(run) > 1 for token in run)


def _past(word: str) -> bool:
    """A verb told in the past: an irregular past form, or a word in "-ed" (not "need", "red"; not
    "related" or "linked", which say how things stand)."""
    regular = len(word) > 4 and word.endswith("ed") and not word.endswith("eed") and word not in STOPWORDS
    return word in IRREGULAR_PAST or regular


def _questions_run_on(spans: list[Span], text: str) -> list[Span]:
    """A question cut at a thing named or an "and" is one question: "has jane | been in touch?" and
    "what's the tracking number | courier for ORD-10768?" ask in every clause up to the "?"."""
    result = list(spans)
    for index in range(len(result) - 2, -1, -1):
        here, after = result[index], result[index + 1]
        same_sentence = not re.search(r"[.!?;\n]", text[here.end : after.start] + here.text[-1:])
        if after.question and same_sentence and here.role == STORY:
            result[index] = replace(here, role=ASKS, question=True)
        elif here.question and same_sentence and _goes_on(after) and not after.question:
            result[index + 1] = replace(after, role=ASKS, question=True, things=after.things or here.things)
    return result


def _goes_on(span: Span) -> bool:
    """Whether a clause may be the rest of a question before it: anything but courtesy, and courtesy
    only for want of content words ("how long has cust 27 | been with us?"), not a "thanks"."""
    return span.role != COURTESY or not any(t.word in COURTESY_WORDS for t in span.tokens)


def possessed(span: Span, index: int) -> bool:
    """Whether the word at ``index`` is someone's ("her delivery address", "the courier's phone"):
    a thing of theirs asked for, even where its words are a topic's."""
    before = span.tokens[index - 1] if index else None
    if before is None:
        return False
    # "jane's", "the courier's"; "it's", "that's", "she's" are "it is", "that is", "she is"
    return before.word in POSSESSIVES or (before.written.endswith("'s") and before.word not in STOPWORDS)


def quantity(span: Span, index: int) -> bool:
    """Whether the word at ``index`` is what a "how much" or "how many" question measures ("how much
    VAT did we charge"): asked for, so a record must hold it."""
    words = [token.word for token in span.tokens[:index]]
    return len(words) >= 2 and words[-2] == "how" and words[-1] in {"much", "many"}


def asks_for_a_thing(span: Span, index: int) -> bool:
    """Whether the word at ``index`` of ``span.tokens`` is a thing asked for: in a clause that names
    things asked for (``Span.things``), after a determiner or a possessive ("the tracking number",
    "her phone"), or before "of/for/on" ("courier for ORD-10768")."""
    before = span.tokens[index - 1] if index else None
    after = next((t.word for t in span.tokens[index + 1 :] if t.word not in DETERMINERS), "")
    return (
        span.things
        or quantity(span, index)
        or (before is not None and (before.word in DETERMINERS or before.written.endswith("'s")))
        or after in {"of", "for", "on"}
    )
