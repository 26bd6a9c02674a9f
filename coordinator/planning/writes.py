"""Which writes a question asks for: a request to act, on what it names positively, within what it says.

Research reads the sources; a write (a refund) is made only where the question asks for it, and the
deterministic pre-call hook lets a write call through only when it matches one of the ``AskedWrite``s
read here (``subagents.writes``). So this reader errs towards asking nothing: what it cannot read as a
clear request is none, and what seems asked but cannot be honoured as asked is an ``unclear`` sentence
saying what to write instead. The rules, over the reader's clauses (``coordinator.planning.spans``),
with their words as data (``coordinator.planning.intents``):

- **A request to act** asks: a clause opened by a refund verb ("refund £45 on ORD-10031", "reimburse",
  "pay back £45", "give her £45 back"), or by a doing verb and a refund noun ("issue a £20 refund",
  "process a refund of £45", "go ahead with the refund"), perhaps after "please", "just", "go ahead
  and" or words addressed to the assistant ("can you", "could you", "I need you to"); or a refund
  asked for with a please ("a £45 refund on ORD-10031, please"). A clause opened by anything else asks
  nothing: "can we refund", "could I refund", "should we refund", "check whether ... can be refunded",
  "the customer asked us to refund", "do not refund", "don't issue a refund", "was it refunded?"; nor
  does "refund" as a noun ("refund of £45", "refund policy", "ORD-10023 refund £750", "Refund: ...").
- **A question is not a request**: a request its sentence's "?" closes ("refund 45 quid on
  ORD-10031?"), unless a question of its own follows it in that sentence, or it is addressed to the
  assistant or said with a please ("can you refund £45 on ORD-10031?"); nor one a later clause of its
  sentence only asks the allowance of ("refund £45 on ORD-10031, is that ok?").
- **Someone else's words are not a request**: a clause in quotes, after a reporting verb ("she said:
  refund it"; not "as she asked, refund it"), in a pasted letter (opened by "Dear" or pasted with its
  header lines, up to the asker's own note or words after its sign-off) or on a customer's line of a
  pasted chat. **What is taken back** is not asked ("..., no, don't", "never mind", "Scratch that.").
- **A condition** the eligibility check decides ("if eligible", "if the policy allows", "if possible":
  ``ELIGIBILITY_WORDS`` only; "if so" is decided by the words of the clause before it) keeps the
  request: the plan checks eligibility first and refunds only if that passes, which is what the
  condition says. Any other ("if the customer returns it", "if not", "unless ...") research cannot
  decide: no write, an unclear sentence.
- **What it acts on** is what the request names positively: in its clause, or in the fragments of its
  sentence that go with it ("Refund ORD-10031, £45"; not another verb's clause, a question, a story or
  a condition). A request that names no order and points back ("refund it") takes the one order its
  sentence names positively. A negated, excluded, contrasted ("not ORD-10134", "except", "other than",
  "rather than", "instead of", "unlike", "ignore") or quoted mention is never taken.
- **How much**: one order and one amount (in digits or words) is a write of at most that amount; one
  order "in full" (``FULL_AMOUNT_PHRASES``) without an amount, of the order's paid total (``full``).
  Two orders (unless each clause pairs one order with its own amount, or orders and amounts alternate
  one for one: "refund £45 on ORD-10031 and £20 on ORD-10022"), two amounts, an amount without an
  order, an order with neither: unclear.
- **At most one write per order**: the same asked twice is one; two different asks on one order are
  unclear, and neither is a write.
- **Any other write tool** (``write_tools``: a registered server's tools that are not read-only) is
  asked only by a request clause that names it by its name ("run append_line with hello", "append_line
  hello"), positively, under the same rules of questions, quotes and someone else's words; it acts on
  the one id its clause names, if any (``target`` None otherwise; never an amount: such a tool's
  arguments are its own). Two ids for one call: unclear.

A query the reader refuses (``QueryError``: a control character, a date that does not exist) asks for
nothing; an amount in another currency is no amount, so no refund of it is asked.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from coordinator.planning.intents import intent_named
from coordinator.planning.lexicon import (
    ACTION_VERBS,
    ADDRESSED_LEAD_INS,
    ANAPHORS,
    CASH_WORDS,
    CONDITION_MARKERS,
    CONTRAST_PHRASES,
    COURTESY_WORDS,
    ELIGIBILITY_WORDS,
    MONEY_BACK_VERBS,
    NEGATION_WORDS,
    NOT_BEFORE_A_VERB,
    NOUN_AFTER,
    PAY_BACK_VERBS,
    PLEASE_WORDS,
    QUESTION_WORDS,
    REFUND_COMPOUNDS,
    REFUND_DOING_VERBS,
    REFUND_NOUN_LEAD,
    REFUND_NOUNS,
    REFUND_PARTICLES,
    REFUND_VERBS,
    RELATIVE_WORDS,
    REPORTING_WORDS,
    REQUEST_LEAD_INS,
    REQUEST_WORDS,
    RETRACTING,
    RETRACTION_WORDS,
    RUN_VERBS,
    SIGN_OFF_WORDS,
    STOPWORDS,
    TOKEN,
    WANTING_WORDS,
)
from coordinator.planning.money import FULL_AMOUNT
from coordinator.planning.plan import Unplanned
from coordinator.planning.reading import Mention, QueryError, Reading, read_query
from coordinator.planning.spans import ASKS, COURTESY, STORY, Span, Token, clauses, sentences
from sources.domain import pounds
from subagents.writes import AskedWrite

__all__ = ["REFUND_TOOL", "AskedWrites", "asked_writes", "writes_in"]

REFUND_TOOL = "issue_refund"
# The kinds of id a registered write tool may be asked to act on.
_ID_KINDS = frozenset({"order_id", "customer_id", "sku", "article_id"})
# A pasted email's header lines, a pasted chat's customer lines, an email's quoted lines.
_HEADER = re.compile(r"^[ \t>]*(?:from|to|cc|subject|sent|date)\s*:", re.I | re.M)
_DEAR = re.compile(r"\s*dear\b", re.I)
_ASKERS_NOTE = re.compile(r"^[ \t]*(?:agent|internal|my|support)?\s*(?:note|agent)\s*:", re.I | re.M)
_THEIR_LINE = re.compile(r"^[ \t]*(?:>|(?:customer|cx|caller|client)\s*:).*$", re.I | re.M)
# A condition the reader left out between clauses, its words being only function words ("If so, ...").
_GAP_CONDITION = re.compile(
    rf"\b(?P<marker>{'|'.join(re.escape(m) for m in CONDITION_MARKERS)})\b(?P<words>[^.!?;,\n]*)", re.I
)
_TAKEN_BACK = re.compile(r"\s*[,;:\-–—(]*\s*(?:no|not|never)\s*[.!,;)]*\s*", re.I)
_SENTENCE_END = re.compile(r"[.!?;\n]")
_PLEASE = re.compile(rf"\b(?:{'|'.join(sorted(PLEASE_WORDS))})\b", re.I)
# Lead-ins as token sequences, longest first; and whether each addresses the assistant.
_LEADS = sorted(
    [(tuple(p.split()), False) for p in REQUEST_LEAD_INS]
    + [(tuple(p.split()), True) for p in ADDRESSED_LEAD_INS],
    key=lambda lead: -len(lead[0]),
)
# The words that open a clause asking for something else ("check ...", "tell me ...", "let me know").
_OTHER_ASKS = (REQUEST_WORDS | ACTION_VERBS | {"let"}) - REFUND_VERBS - PLEASE_WORDS - WANTING_WORDS
_MOST_QUOTED = 80  # characters of a condition an unclear sentence quotes
_MOST_BETWEEN = 5  # words between a doing verb and its refund noun ("issue her a full goodwill refund")


@dataclass(frozen=True)
class AskedWrites:
    """The writes a question asks for, and a sentence for each it seems to ask that cannot be honoured
    as asked ("it names two orders for one refund (ORD-10031, ORD-10022): ask for one refund per ...")."""

    writes: tuple[AskedWrite, ...] = ()
    unclear: tuple[str, ...] = ()
    # The unclear asks as a plan lists what it did not do: what, why, and what to write instead.
    gaps: tuple[Unplanned, ...] = field(default=(), compare=False, repr=False)


def asked_writes(query: str, write_tools: Iterable[str] = ()) -> AskedWrites:
    """The writes ``query`` asks for: refunds, and calls of ``write_tools`` (tool names, bare or as
    ``source.tool``) it asks for by name. A query that cannot be read asks for none."""
    try:
        reading = read_query(query)
    except QueryError:
        return AskedWrites()
    return writes_in(reading, write_tools)


def writes_in(reading: Reading, write_tools: Iterable[str] = ()) -> AskedWrites:
    """The writes a query's ``reading`` asks for (``asked_writes``)."""
    question = _Question(reading)
    found = [*question.refunds()]
    for tool in dict.fromkeys(name.rsplit(".", 1)[-1] for name in write_tools):
        if tool and tool != REFUND_TOOL:
            found += question.tool_calls(tool)
    return _settled(found)


# --- the question's clauses -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Clause:
    """A clause (its spans), the text after it up to the next one, and where it stands."""

    spans: tuple[Span, ...]
    after: str
    sentence: int
    index: int  # among the query's clauses

    @property
    def start(self) -> int:
        return self.spans[0].start

    @property
    def end(self) -> int:
        return self.spans[-1].end

    @functools.cached_property
    def tokens(self) -> tuple[Token, ...]:
        return tuple(token for span in self.spans for token in span.tokens)

    @property
    def role(self) -> str:
        return self.spans[0].role

    @property
    def asks(self) -> bool:
        """Whether a "?" closes it (after it, or at the end of its words)."""
        return "?" in self.after or self.spans[-1].text.endswith("?")

    def words(self) -> list[str]:
        return [token.word for token in self.tokens]


@dataclass(frozen=True)
class _Head:
    """How a clause opens: the token its verb (or tool) is, whether it addresses the assistant (or says
    please), and a condition before the verb ("if so refund it")."""

    at: int
    addressed: bool
    condition: tuple[Token, ...] = ()


@dataclass(frozen=True)
class _Condition:
    """A condition a request is asked on: its marker, its words after it (as read), where it is, and
    the clause before it ("if so": what that clause asked is the condition)."""

    marker: str
    words: tuple[str, ...]
    start: int
    end: int
    before: _Clause | None


@dataclass(frozen=True)
class _Found:
    """A write a request asks for, or why what it asks cannot be honoured as asked."""

    write: AskedWrite | None = None
    gap: Unplanned | None = None


class _Question:
    """A query read for what it asks to be done: its clauses by sentence, its quotations, and the
    parts that are someone else's words (a pasted letter, a customer's lines)."""

    def __init__(self, reading: Reading) -> None:
        self.reading = reading
        self.text = reading.query
        spans = list(reading.spans)
        sentence_of = {i: n for n, group in enumerate(sentences(spans, self.text)) for i in group}
        groups = clauses(spans)
        self.clauses: list[_Clause] = []
        self.sentences: dict[int, list[_Clause]] = {}
        for index, group in enumerate(groups):
            following = spans[groups[index + 1][0]].start if index + 1 < len(groups) else len(self.text)
            after = self.text[spans[group[-1]].end : following]
            clause = _Clause(tuple(spans[i] for i in group), after, sentence_of[group[0]], index)
            self.clauses.append(clause)
            self.sentences.setdefault(clause.sentence, []).append(clause)
        self.quoted = reading.quoted
        # Everything named, what is named only to be left out among it: how a clause is built ("ORD-10023
        # refund £750": a noun after a thing named) does not change with what is left out.
        self.named = sorted([*reading.mentions, *reading.excluded], key=lambda mention: mention.start)
        self.starts = [mention.start for mention in self.named]
        self.not_the_askers = _someone_elses(self.text, spans)
        self._heads: dict[int, _Head | None] = {}
        self._courtesy: dict[int, list[Token]] = {}
        self._tails: dict[int, tuple[list[bool], list[bool]]] = {}

    def sentence(self, clause: _Clause) -> list[_Clause]:
        return self.sentences[clause.sentence]

    def before(self, clause: _Clause) -> _Clause | None:
        """The clause before ``clause`` in the query ("Is it eligible? If so, refund it": the question)."""
        return self.clauses[clause.index - 1] if clause.index > 0 else None

    # -- how a clause opens

    def head(self, clause: _Clause) -> _Head | None:
        """How ``clause`` opens if it is a request for a refund; None if it is not one."""
        if clause.index not in self._heads:
            self._heads[clause.index] = self._head(clause)
        return self._heads[clause.index]

    def _head(self, clause: _Clause) -> _Head | None:
        tokens = clause.tokens
        at, addressed = _lead_in(tokens)
        please = addressed or self._please(clause)
        if at < len(tokens) and tokens[at].written == "if":  # "if so refund it": the condition, then the verb
            for verb in range(at + 1, min(at + 7, len(tokens))):
                if tokens[verb - 1].written not in NOT_BEFORE_A_VERB and self._asks_a_refund(tokens, verb):
                    return _Head(verb, please, tokens[at:verb])
            return None
        # The verb opens the clause: after a thing named it is a noun ("ORD-10023 refund £750").
        if (
            at < len(tokens)
            and not self._named_before(clause, tokens[at])
            and self._asks_a_refund(tokens, at)
        ):
            heading = (
                at == len(tokens) - 1 and clause.after.lstrip().startswith(":") and not self._names(clause)
            )
            return None if heading else _Head(at, please)  # "Refund: was ORD-10031 refunded?" is a heading
        noun = at
        while noun < len(tokens) and tokens[noun].word in {"a", "an", "the", "full", "partial", "goodwill"}:
            noun += 1
        if (
            please
            and noun < len(tokens)
            and tokens[noun].word in REFUND_NOUNS
            and not self._about(tokens, noun)
        ):
            return _Head(noun, True)  # "a £45 refund on ORD-10031, please"
        return None

    def _asks_a_refund(self, tokens: tuple[Token, ...], at: int) -> bool:
        """Whether the word at ``at`` opens a request for a refund: "refund ...", "pay (her) back",
        "give her £45 back", "issue a refund"."""
        word = tokens[at].word
        if word in REFUND_VERBS:
            following = tokens[at + 1] if at + 1 < len(tokens) else None
            if following is None or self._named_between(tokens[at], following):
                return True  # "refund", "refund £45 on ...", "refund ORD-10031 in full"
            return following.word not in NOUN_AFTER and following.word not in REFUND_COMPOUNDS
        back = next((i for i in range(at + 1, min(at + 5, len(tokens))) if tokens[i].word == "back"), None)
        if word in PAY_BACK_VERBS and back is not None and back <= at + 3:
            return True
        if word in MONEY_BACK_VERBS and back is not None:
            cash = any(token.word in CASH_WORDS for token in tokens[at + 1 : back])
            if cash or self._named_between(tokens[at], tokens[back], kind="amount"):
                return True
        if word not in REFUND_DOING_VERBS:
            return False
        after = at + 1
        while after < len(tokens) and tokens[after].word in REFUND_PARTICLES.get(word, ()):
            after += 1
        for index in range(after, min(after + _MOST_BETWEEN, len(tokens))):
            if tokens[index].word in REFUND_NOUNS:
                return not self._about(tokens, index)
            if tokens[index].word not in REFUND_NOUN_LEAD:
                return False
        return False

    def _about(self, tokens: tuple[Token, ...], noun: int) -> bool:
        """Whether the refund noun at ``noun`` names something about a refund ("refund policy")."""
        following = tokens[noun + 1] if noun + 1 < len(tokens) else None
        return (
            following is not None
            and following.word in REFUND_COMPOUNDS
            and not self._named_between(tokens[noun], following)
        )

    def _named_before(self, clause: _Clause, token: Token) -> bool:
        """Whether the clause names something before ``token``."""
        at = bisect.bisect_left(self.starts, clause.start)
        return at < len(self.starts) and self.starts[at] < token.start

    def _named_between(self, first: Token, last: Token, kind: str = "") -> bool:
        """Whether the query names something (of ``kind``) between two words."""
        starts = self.starts
        between = self.named[
            bisect.bisect_right(starts, first.start) : bisect.bisect_left(starts, last.start)
        ]
        return any(not kind or mention.kind == kind for mention in between)

    def _please(self, clause: _Clause) -> bool:
        """Whether a please word is in the clause, in the courtesy of its sentence, or beside the clause
        in words the reader left out ("a £45 refund on ORD-10031, please")."""
        if clause.sentence not in self._courtesy:
            courtesy = [t for c in self.sentence(clause) if c.role == COURTESY for t in c.tokens]
            self._courtesy[clause.sentence] = courtesy
        if any(token.word in PLEASE_WORDS for token in [*clause.tokens, *self._courtesy[clause.sentence]]):
            return True
        before = self.before(clause)
        beside = clause.after + (
            before.after if before is not None and before.sentence == clause.sentence else ""
        )
        return _PLEASE.search(beside) is not None

    def positive_orders(self) -> list[str]:
        """Every order the query names positively (what an unclear ask's example may name)."""
        return _values(self.named_in(self.clauses, {"order_id"}))

    # -- whose words, and asked how

    def positive(self, at: int, span: Span) -> bool:
        """Whether what is named at ``at`` (in ``span``) is named positively: not in quotes, and after no
        negation or contrast in its span ("not ORD-10134", "other than ORD-10134"): the reader's one
        rule (``coordinator.planning.reading.left_out``), which research keeps to as well."""
        return self.reading.positive(at, span)

    def theirs(self, clause: _Clause, at: int, *, quotes: bool = True) -> bool:
        """Whether the words at ``at`` are someone else's: quoted, a letter's or a customer's, or reported
        ("she said: refund it"; not "as she asked, refund it", which is the asker's own)."""
        if (quotes and _inside(self.quoted, at)) or _inside(self.not_the_askers, at):
            return True
        before = self.before(clause)
        if before is None or before.sentence != clause.sentence or not before.tokens:
            return False
        joined = self.text[before.end : clause.start].strip(" \t\"'“”‘’")
        reporting = bool(set(before.words()[-2:]) & REPORTING_WORDS) and before.tokens[0].written != "as"
        return reporting and joined in {"", ":", ","}

    def questioned(self, clause: _Clause, head: _Head) -> bool:
        """Whether a request is asked as a question: its sentence's "?" closes it, where no question of
        its own comes after it in the sentence ("refund £45 on ORD-10031?", "refund £45, ORD-10031?"; not
        "refund £45 on ORD-10031 and are there tickets?"), unless it is addressed to the assistant or
        said with a please; or a later clause asks only whether it may be done ("..., is that ok?")."""
        sentence = self.sentence(clause)
        after = clause.index - sentence[0].index + 1
        opens, allowance = self._after(clause.sentence)
        closed = clause.asks or (after < len(sentence) and sentence[-1].asks and not opens[after])
        return (closed and not head.addressed) or allowance[after]

    def _after(self, sentence: int) -> tuple[list[bool], list[bool]]:
        """For each place in a sentence, whether a clause from there on opens a question of its own, and
        whether one only asks whether what came before may be done (no thing named, only words of
        eligibility: "is that ok?")."""
        if sentence not in self._tails:
            said = self.sentences[sentence]
            opens, allowance = [False] * (len(said) + 1), [False] * (len(said) + 1)
            for at in reversed(range(len(said))):
                each = said[at]
                opens[at] = opens[at + 1] or _opens_a_question(each)
                only = all(
                    w in ELIGIBILITY_WORDS or w in STOPWORDS or w in COURTESY_WORDS for w in each.words()
                )
                allowance[at] = allowance[at + 1] or (each.asks and not self._names(each) and only)
            self._tails[sentence] = (opens, allowance)
        return self._tails[sentence]

    def retracted(self, clause: _Clause) -> bool:
        """Whether what ``clause`` says is taken back right after it: "..., no, don't", "— no wait,
        never mind", or by a sentence that only takes back ("Refund £45 on ORD-10031. Actually, don't.")."""
        if _TAKEN_BACK.fullmatch(clause.after):
            return True  # "... - no." (a lone "no" the reader leaves out)
        following = self.clauses[clause.index + 1 :]
        if following and following[0].sentence != clause.sentence:
            return self._takes_back(self.sentences[following[0].sentence])
        said = itertools.takewhile(lambda c: c.sentence == clause.sentence and not self._names(c), following)
        return any(self._takes_back([c]) for c in said)

    def _names(self, clause: _Clause) -> bool:
        return any(
            bisect.bisect_left(self.starts, span.start) < bisect.bisect_left(self.starts, span.end)
            for span in clause.spans
        )

    def _takes_back(self, chosen: list[_Clause]) -> bool:
        """Whether ``chosen`` only take back: no thing named, only ``RETRACTION_WORDS``, one retracting."""
        words = [token.written for clause in chosen for token in clause.tokens]
        return (
            not any(map(self._names, chosen))
            and all(word in RETRACTION_WORDS for word in words)
            and any(word in RETRACTING for word in words)
        )

    # -- what is asked

    def refunds(self) -> Iterator[_Found]:
        """Every refund the query asks for, or why it cannot be honoured as asked."""
        for clause in self.clauses:
            head = self.head(clause)
            if (
                head is None
                or self.theirs(clause, clause.tokens[head.at].start)
                or self.questioned(clause, head)
                or self.retracted(clause)
            ):
                continue
            yield from _Request(self, clause, head).found()

    def goes_with(self, clause: _Clause) -> bool:
        """Whether a clause beside the request says more of what it acts on ("Refund ORD-10031, £45"):
        not a story, a question, a condition, or another verb's ask ("check ...")."""
        if clause.role == STORY:
            return False
        tokens = clause.tokens
        if not tokens:
            return True  # only things named
        first = tokens[min(_lead_in(tokens)[0], len(tokens) - 1)]
        return not (first.written in QUESTION_WORDS or _marker(tokens, 0) or first.word in _OTHER_ASKS)

    def tool_calls(self, tool: str) -> Iterator[_Found]:
        """The calls of ``tool`` the query asks for by its name, each on the one id its clause names."""
        pattern = re.compile(rf"(?<![\w.-])(?:[\w-]+\.)?{re.escape(tool)}(?![\w-])", re.I)
        for named in pattern.finditer(self.text):
            clause = next(
                (c for c in self.clauses if _inside([(s.start, s.end) for s in c.spans], named.start())), None
            )
            head = self._tool_head(clause, named) if clause is not None else None
            if clause is None or head is None or self.questioned(clause, head):
                continue
            following = [c for c in self.sentence(clause) if c.index > clause.index]
            more = list(itertools.takewhile(self.goes_with, following))  # "run it on ORD-1, ORD-2"
            ids = _values(self.named_in([clause, *more], _ID_KINDS))
            if len(ids) > 1:
                why = f"it asks for one {tool} call on {len(ids)} ids ({_listed(ids)})"
                yield _Found(
                    gap=Unplanned(tool, why, f"ask for one {tool} call per id, e.g. 'run {tool} on {ids[0]}'")
                )
            else:
                asked = self.text[clause.start : max(c.end for c in [clause, *more])].strip(" \t\n,;:-–—")
                yield _Found(AskedWrite(tool, ids[0] if ids else None, asked=asked))

    def _tool_head(self, clause: _Clause, named: re.Match[str]) -> _Head | None:
        """How ``clause`` opens if it asks for the tool ``named``: "run append_line ...", "append_line hello"."""
        tokens = clause.tokens
        at, addressed = _lead_in(tokens)
        of_tool = [i for i, token in enumerate(tokens) if named.start() <= token.start < named.end()]
        if not of_tool or at >= len(tokens):
            return None
        gap = [t for t in tokens[at + 1 : of_tool[0]] if t.word not in {"the", "a", "tool"}]
        if of_tool[0] != at and not (tokens[at].word in RUN_VERBS and not gap):
            return None
        # A quoted name is a name ("run `append_line`"); a quoted request is someone's words.
        quote = next(((s, e) for s, e in self.quoted if s <= tokens[at].start < e), None)
        if quote is not None and not (named.start() - 1 <= quote[0] and quote[1] <= named.end() + 1):
            return None
        if self.theirs(clause, tokens[at].start, quotes=False):
            return None
        return _Head(at, addressed or self._please(clause))

    def named_in(
        self, chosen: Iterable[_Clause], kinds: Iterable[str], leave_out: Iterable[tuple[int, int]] = ()
    ) -> list[Mention]:
        """What ``chosen`` name of ``kinds`` positively, outside the ranges ``leave_out`` (conditions)."""
        wanted, left_out = set(kinds), list(leave_out)
        return [
            mention
            for clause in chosen
            for span in clause.spans
            for mention in self.reading.mentions_in(span)
            if mention.kind in wanted
            and not _inside(left_out, mention.start)
            and self.positive(mention.start, span)
        ]

    def in_full(self, chosen: Iterable[_Clause], leave_out: list[tuple[int, int]]) -> bool:
        """Whether ``chosen`` ask positively for the order's whole amount ("in full", "the whole order")."""
        return any(
            not _inside(leave_out, found.start())
            and self.positive(found.start(), span)
            and self._unnegated(span.end, found.start())
            for clause in chosen
            for span, end in _with_what_follows(clause)
            for found in FULL_AMOUNT.finditer(self.text, span.start, end)
        )

    def _unnegated(self, start: int, at: int) -> bool:
        """Whether the words from ``start`` up to ``at`` (those after a clause's span) negate or contrast
        nothing: "refund ORD-10031 please, not in full" asks no whole amount."""
        if at <= start:
            return True
        written = TOKEN.findall(self.text[start:at].lower())
        said = f" {' '.join(written)} "
        return not set(written) & NEGATION_WORDS and not any(
            f" {phrase} " in said for phrase in CONTRAST_PHRASES
        )


def _with_what_follows(clause: _Clause) -> list[tuple[Span, int]]:
    """Each span of ``clause`` and where its text ends: the last one takes the words no clause holds
    after it ("refund ORD-10031 in full please": "in full please" is courtesy to the cutter)."""
    spans = list(clause.spans)
    ends = [span.end for span in spans]
    ends[-1] += len(clause.after)
    return list(zip(spans, ends, strict=True))


class _Request:
    """One clause that asks for a refund, with its sentence: what it names, and on what condition."""

    def __init__(self, question: _Question, clause: _Clause, head: _Head) -> None:
        self.question = question
        self.clause = clause
        self.head = head
        self.sentence = question.sentence(clause)
        # Its clauses: from the start of its sentence if it is the sentence's first request, else from
        # itself, up to the next request.
        place = clause.index - self.sentence[0].index
        earlier = any(question.head(c) is not None for c in self.sentence[:place])
        last = next(
            (
                at
                for at in range(place + 1, len(self.sentence))
                if question.head(self.sentence[at]) is not None
            ),
            len(self.sentence),
        )
        self.around = [c for c in self.sentence[place if earlier else 0 : last] if c is not clause]
        self.conditions = self._conditions()
        fragments = [c for c in self.around if question.goes_with(c) and not question.retracted(c)]
        self.chosen = sorted([clause, *fragments], key=lambda c: c.index)  # not those taken back

    def _conditions(self) -> list[_Condition]:
        """The conditions the request is asked on: before its verb, in its clause after it, a clause of
        their own beside it ("if it is eligible, refund ..."), or words the reader left between clauses
        ("Is it eligible? If so, refund it")."""
        question, clause, found = self.question, self.clause, []
        if self.head.condition:
            tokens = self.head.condition
            end = tokens[-1].start + len(tokens[-1].written)
            found.append(_condition(tokens, 0, tokens[0].start, end, question.before(clause)))
        tokens = clause.tokens
        marked = next((i for i in range(self.head.at + 1, len(tokens)) if _marker(tokens, i)), None)
        if marked is not None:
            found.append(_condition(tokens, marked, tokens[marked].start, clause.end, None))
        for other in sorted([clause, *self.around], key=lambda c: c.index):
            before = question.before(other)
            if other is not clause and _marker(other.tokens, 0):
                found.append(_condition(other.tokens, 0, other.start, other.end, before))
            gap = before.end if before is not None else 0
            ends = [mark.end() for mark in _SENTENCE_END.finditer(question.text, gap, other.start)]
            left = _GAP_CONDITION.search(question.text, ends[-1] if ends else gap, other.start)
            if left is not None:
                said = tuple(word.lower() for word in re.findall(r"[a-z']+", left["words"], re.I))
                found.append(_Condition(left["marker"].lower(), said, left.start(), left.end(), before))
        return found

    def found(self) -> Iterator[_Found]:
        """The write this request asks for, or why it cannot be honoured as asked."""
        question = self.question
        undecided = next((c for c in self.conditions if not _decided_by_the_check(c)), None)
        leave_out = [(c.start, c.end) for c in self.conditions]
        orders = question.named_in(self.chosen, {"order_id"}, leave_out)
        amounts = question.named_in(self.chosen, {"amount"}, leave_out)
        if not orders and set(self.clause.words()) & ANAPHORS:  # "refund it": the order its sentence names
            orders = question.named_in([c for c in self.sentence if c.role != STORY], {"order_id"})
        full = question.in_full(self.chosen, leave_out)
        asked = self._asked([*orders, *amounts])
        order_ids, pounds_asked = _values(orders), [float(value) for value in _values(amounts)]
        if undecided is not None:
            yield _Found(gap=_conditional(order_ids, undecided, question.text))
        elif len(order_ids) > 1:
            paired = self._each_paired(len(order_ids), leave_out) or self._alternating(orders, amounts)
            yield from paired or [_Found(gap=_two_orders(order_ids, pounds_asked, full))]
        elif len(order_ids) == 1 and len(pounds_asked) == 1:
            yield _Found(AskedWrite(REFUND_TOOL, order_ids[0], pounds_asked[0], asked=asked))
        elif len(order_ids) == 1 and not pounds_asked and full:
            yield _Found(AskedWrite(REFUND_TOOL, order_ids[0], None, full=True, asked=asked))
        else:
            yield _Found(gap=_unnamed(order_ids, pounds_asked, full, question.positive_orders()))

    def _each_paired(self, orders: int, leave_out: list[tuple[int, int]]) -> list[_Found]:
        """One write per clause where each names one order and its own amount (or "in full"), and no
        amount stands alone: "refund £45 on ORD-10031 and £20 on ORD-10022"; else none."""
        question, found = self.question, []
        for clause in self.chosen:
            own_orders = question.named_in([clause], {"order_id"}, leave_out)
            own_amounts = question.named_in([clause], {"amount"}, leave_out)
            full = question.in_full([clause], leave_out)
            if not own_orders and not own_amounts:
                continue
            if len(_values(own_orders)) != 1 or len(_values(own_amounts)) > 1 or not (own_amounts or full):
                return []
            amount = float(own_amounts[0].value) if own_amounts else None
            asked = self._asked([*own_orders, *own_amounts])
            found.append(
                _Found(AskedWrite(REFUND_TOOL, own_orders[0].value, amount, full=amount is None, asked=asked))
            )
        return found if len(found) == orders else []

    def _alternating(self, orders: list[Mention], amounts: list[Mention]) -> list[_Found]:
        """One write per order where distinct orders and amounts alternate, one each, as written
        ("refund ORD-10102 (£12.99) and ORD-10103 (£30)", "£45 on ORD-10031 and £20 on ORD-10022");
        else none."""
        named = sorted([*orders, *amounts], key=lambda mention: mention.start)
        if len(orders) != len(amounts) or len(_values(orders)) != len(orders):
            return []
        if any(first.kind == second.kind for first, second in itertools.pairwise(named)):
            return []
        found = []
        for first, second in zip(named[0::2], named[1::2], strict=True):
            order, amount = (first, second) if first.kind == "order_id" else (second, first)
            write = AskedWrite(
                REFUND_TOOL, order.value, float(amount.value), asked=self._asked([order, amount])
            )
            found.append(_Found(write))
        return found

    def _asked(self, used: list[Mention]) -> str:
        """The words that asked: from the request (and a condition before its verb) to the end of the
        last clause naming what it acts on."""
        text = self.question.text
        start = self.head.condition[0].start if self.head.condition else self.clause.start
        start = min([start, *(mention.start for mention in used)])
        starts = [c.start for c in self.sentence]
        naming = [self.sentence[bisect.bisect_right(starts, mention.start) - 1] for mention in used]
        end = max([self.clause.end, *(c.end for c in naming)])
        while end < len(text) and text[end] in ")]\"'”’":  # its closing bracket or quote
            end += 1
        return text[start:end].strip(" \t\n,;:-–—")


# --- the rules' parts ---------------------------------------------------------------------------------


def _lead_in(tokens: tuple[Token, ...]) -> tuple[int, bool]:
    """How many tokens open a clause before its verb ("please", "can you", "go ahead and"), and whether
    they address the assistant."""
    at, addressed = 0, False
    while at < len(tokens):
        for phrase, to_you in _LEADS:
            if tuple(token.written for token in tokens[at : at + len(phrase)]) == phrase:
                at, addressed = at + len(phrase), addressed or to_you
                break
        else:
            break
    return at, addressed


def _opens_a_question(clause: _Clause) -> bool:
    """Whether a clause is a question of its own: opened by a question word ("what does ...", "are
    there ..."), not a relative pronoun ("..., which must never be refunded")."""
    tokens = clause.tokens
    at = _lead_in(tokens)[0]
    return at < len(tokens) and tokens[at].written in QUESTION_WORDS - RELATIVE_WORDS


def _marker(tokens: tuple[Token, ...], at: int) -> str:
    """The condition marker at ``at`` ("if", "as long as"), or ""."""
    for marker in CONDITION_MARKERS:
        words = tuple(marker.split())
        if tuple(token.written for token in tokens[at : at + len(words)]) == words:
            return marker
    return ""


def _condition(
    tokens: tuple[Token, ...], at: int, start: int, end: int, before: _Clause | None
) -> _Condition:
    """The condition whose marker is at ``at`` of ``tokens`` (its words up to their end)."""
    marker = _marker(tokens, at) or "if"
    return _Condition(marker, tuple(t.word for t in tokens[at + len(marker.split()) :]), start, end, before)


def _decided_by_the_check(condition: _Condition) -> bool:
    """Whether the eligibility check decides ``condition`` ("if eligible", "if the policy allows"; "if so"
    after "is it eligible?"): every word of it is one of ``ELIGIBILITY_WORDS``. "unless" never is."""
    if condition.marker == "unless" or set(condition.words) & NEGATION_WORDS:
        return False  # "unless ...", "if not": the refund is asked where the check would not decide it

    def content(words: Iterable[str]) -> list[str]:
        return [word for word in words if word not in STOPWORDS and word not in COURTESY_WORDS]

    words = content(condition.words)
    if not words and set(condition.words) & {"so", "yes"} and condition.before is not None:
        words = content(condition.before.words())  # "if so": what the clause before asked
    return all(word in ELIGIBILITY_WORDS for word in words)


def _values(mentions: list[Mention]) -> list[str]:
    return list(dict.fromkeys(mention.value for mention in mentions))


def _inside(ranges: Iterable[tuple[int, int]], at: int) -> bool:
    return any(start <= at < end for start, end in ranges)


def _someone_elses(text: str, spans: list[Span]) -> list[tuple[int, int]]:
    """The parts of a query that are someone else's words: a customer's lines of a pasted chat, an email's
    quoted lines, and a pasted letter: one opened by "Dear", or pasted with its header lines, up to the
    asker's own note after it ("agent note: ...") or its sign-off where the asker's words follow that,
    else all of it; without those, up to a sign-off the asker's own words follow."""
    ranges = [found.span() for found in _THEIR_LINE.finditer(text)]
    note = _ASKERS_NOTE.search(text)
    ends = [note.start()] if note is not None and note.start() > 0 else []
    for index, span in enumerate(spans):
        if span.role != COURTESY or not {t.word for t in span.tokens} & SIGN_OFF_WORDS:
            continue
        blank = re.compile(r"\n[ \t]*\n").search(text, span.end)
        if any(
            later.role == ASKS
            and "\n" in text[span.end : later.start]
            and (
                (blank is not None and later.start >= blank.end()) or len(later.tokens) > 4 or later.question
            )
            for later in spans[index + 1 :]
        ):
            ends.append(span.end)
    letter = _HEADER.search(text) or _DEAR.match(text)
    end = min(ends) if ends else 0
    if letter is not None:
        ranges.append((letter.start(), end if end > letter.start() else len(text)))
    elif end:
        ranges.append((0, end))
    return ranges


# --- what cannot be honoured as asked, and the writes settled ----------------------------------------


def _listed(items: list[str], most: int = 5) -> str:
    """Items as a sentence lists them: at most ``most``, then how many more."""
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _example(amounts: list[float], full: bool, order: str) -> str:
    if amounts:
        return f"'refund {pounds(amounts[0])} on {order}'"
    return f"'refund {order} in full'" if full else f"'refund £45 on {order}'"


def _two_orders(orders: list[str], amounts: list[float], full: bool) -> Unplanned:
    each = [_example(amounts[i : i + 1], full, order) for i, order in enumerate(orders[:2])]
    return Unplanned(
        f"a refund on {' and '.join(orders) if len(orders) == 2 else _listed(orders)}",
        f"it names {len(orders)} orders for one refund ({_listed(orders)})",
        f"ask for one refund per order, e.g. {' and '.join(each)}",
    )


def _unnamed(orders: list[str], amounts: list[float], full: bool, named: list[str]) -> Unplanned:
    """A refund asked with two amounts for its order, an order without an amount, or no order
    (``named``: the orders the query names positively anywhere, for the example)."""
    if orders and len(amounts) > 1:
        listed = _listed([pounds(amount) for amount in amounts])
        return Unplanned(
            f"a refund on {orders[0]}", f"it names {len(amounts)} amounts for one refund on {orders[0]} ({listed})",
            f"ask for the one amount to refund, e.g. {_example(amounts, False, orders[0])}",
        )  # fmt: skip
    if orders:
        return Unplanned(
            f"a refund on {orders[0]}", f"it asks to refund {orders[0]} but says no amount",
            f"say how much, e.g. 'refund £45 on {orders[0]}', or 'refund {orders[0]} in full'",
        )  # fmt: skip
    if amounts or full:
        asked = f"a refund of {pounds(amounts[0])}" if amounts else "a refund in full"
        example = _example(amounts, full, named[0] if len(named) == 1 else "ORD-NNNNN")
        return Unplanned(
            f"the amount {pounds(amounts[0])}" if amounts else asked,
            f"it asks for {asked} but names no order it is on (a negated or quoted one is not taken)",
            f"name the order in the request, e.g. {example}",
        )  # fmt: skip
    refund = intent_named("refund")
    return Unplanned(
        refund.unanswered, "it asks for a refund but names no order and no amount", refund.ask_for
    )


def _conditional(orders: list[str], condition: _Condition, text: str) -> Unplanned:
    said = " ".join(text[condition.start : condition.end].split()).rstrip(".!?,;")
    said = said if len(said) <= _MOST_QUOTED else said[: _MOST_QUOTED - 1] + "…"
    return Unplanned(
        f"a refund on {' and '.join(orders) if len(orders) == 2 else _listed(orders)}"
        if orders
        else "a refund",
        f"it asks for the refund only '{said}', which research cannot decide",
        "find that out first, then ask for the refund without the condition",
    )


def _settled(found: list[_Found]) -> AskedWrites:
    """The writes found, at most one per tool and target: the same asked twice is one; two different
    asks on one target are unclear, and neither is a write."""
    by_target: dict[tuple[str, str | None], list[AskedWrite]] = {}
    gaps = [each.gap for each in found if each.gap is not None]
    for each in found:
        if each.write is not None:
            by_target.setdefault((each.write.tool, each.write.target), []).append(each.write)
    writes = []
    for (tool, target), asked in by_target.items():
        if len({(write.amount, write.full) for write in asked}) == 1:
            writes.append(asked[0])
            continue
        said = ", ".join(dict.fromkeys(write.describe().split(", ", 1)[-1] for write in asked))
        what = f"a refund on {target}" if tool == REFUND_TOOL else f"{tool} on {target}"
        gaps.append(Unplanned(
            what, f"it asks for {len(asked)} different {tool} calls on {target} ({said})",
            f"ask for one, e.g. '{asked[0].asked}'",
        ))  # fmt: skip
    gaps = list(dict.fromkeys(gaps))
    # Each unclear sentence is "why: what to write instead" (a why holds no ": " of its own).
    unclear = tuple(f"{gap.why.replace(': ', ' - ')}: {gap.next_step}" for gap in gaps)
    return AskedWrites(tuple(writes), unclear, tuple(gaps))
