"""Every word a query asks with is accounted for: used by a task, context, or listed as not researched.

After planning, each ``asks`` span (``coordinator.planning.spans``) is read word by word. A word is accounted
for when it asks an intent that was planned or reported (its keyword, a phrase, or the semantic
matcher's reading of the whole clause), when a task uses it (search words, a name), or when it names a
field of a record a planned task returns ("the status of ORD-10031"). What is left is listed:

- *no source holds it*, when it is a thing asked for ("the tracking number", "jane's phone") and no
  record that any tool returns has such a field (the fields come from the tools' output schemas,
  ``sources/records.json``);
- *not understood* otherwise, with the matcher's nearest reading and what to do.

Either makes the answer ``partial``: a plan is ``complete`` only when nothing is left.
"""

from __future__ import annotations

import functools

from coordinator.planning.english import correct, is_english
from coordinator.planning.intents import INTENTS
from coordinator.planning.lexicon import (
    ABOUT_WORDS,
    ACTION_OBJECTS,
    ACTION_OPENERS,
    ACTION_VERBS,
    ELIGIBILITY_WORDS,
    GENERIC_WORDS,
    LIGHT_WORDS,
    REQUEST_WORDS,
    STOPWORDS,
    SYMPTOM_WORDS,
    TOPIC_WORDS,
)
from coordinator.planning.meaning import THRESHOLD
from coordinator.planning.plan import PlannedTask, SpanRole, Unplanned
from coordinator.planning.reading import Reading, phrase_words, record_words, unknown_ids, words_of_phrases
from coordinator.planning.spans import (
    ASKS,
    COURTESY,
    STORY,
    Span,
    Token,
    asks_for_a_thing,
    clauses,
    possessed,
    quantity,
    sentences,
)
from coordinator.planning.tools import intents_taking, tool_arguments
from sources.catalogue import record_fields

__all__ = ["SpanRole", "account_for_words"]

_REPHRASE = (
    "rephrase it with what to look up (orders, tickets, invoices, a refund, a policy), or use --llm claude"
)


def account_for_words(reading: Reading, tasks: list[PlannedTask]) -> tuple[list[Unplanned], list[SpanRole]]:
    """What the asks of ``reading`` leave unaccounted for once ``tasks`` are planned, and every span's role."""
    unplanned: list[Unplanned] = []
    roles: list[SpanRole] = []
    held = _held_words(tasks)
    used = {word for task in tasks for word in _used_words(task)}
    asked = reading.intents | reading.weak_intents
    checked = {task.arguments.get("amount") for task in tasks if task.tool == "refund_eligibility"}
    spans = list(reading.spans)
    around = _Around(spans, reading.query)
    for index, span in enumerate(spans):
        if span.role != ASKS:
            if span.unread and span.role == STORY:  # what cannot be read is not known to be only a story
                unplanned += _unread(span)
                roles.append(SpanRole(span.text, "not understood", how=_context(span, reading)))
            else:
                roles.append(SpanRole(span.text, span.role, how=_context(span, reading)))
            continue
        searched = used if around.describes(index) else set()
        runs = _unexplained_runs(span, reading, asked, held, searched, checked, around.named[index])
        # Words of things sold and of what goes wrong ("espresso machine", "broken") are what an ask is
        # about, never the ask: listed only where nothing else in the clause is.
        asks = [
            run
            for run in runs
            if span.things
            or possessed(span, run[0][0])
            or run[0][0] == _which_thing(span)  # "confirm what address you have"
            or quantity(span, run[0][0])
            or not all(token.word in TOPIC_WORDS for _, token in run)
        ]
        listed = [_listed(span, run, reading.query) for run in asks]
        action = _action(span)
        if action:
            listed = [
                Unplanned(
                    f"'{action}'",
                    "research reads the sources and does nothing: this asks for something to be done",
                    "do it where it is done; research can check what it needs first",
                )
            ]
        if span.unread:
            listed += _unread(span)
        unplanned += listed
        own = _tasks_of(span, reading, tasks)
        role = ASKS if own or not listed else listed[0].why.split(":")[0]
        roles.append(SpanRole(span.text, role, own, _how(span, reading)))
    return unplanned, roles


def _unexplained_runs(
    span: Span,
    reading: Reading,
    asked: frozenset[str],
    held: set[str],
    searched: set[str],
    checked: set[object],
    named: bool,
) -> list[list[tuple[int, Token]]]:
    """The words of an ask nothing accounts for, in runs of neighbours ("tracking number", "courier").

    ``held`` are the words of the planned records' fields and values, ``searched`` the words a planned
    search uses (empty where the clause's words are not what to search for), ``named`` whether the
    clause's sentence names someone or something."""
    if span.match is not None and span.match.understood and span.match.intent in asked:
        return []  # the clause as a whole asks that intent
    in_phrases = words_of_phrases(_text_of(span))
    keyword_asked = bool(span.asked) or any(_asks(token.word) for token in span.tokens)
    verb_until, eligibility = _verb_until(span, reading, checked), ELIGIBILITY_WORDS if checked else set()
    about = _about_from(span, keyword_asked or named or (span.match is not None and span.match.understood))
    thing_until, which = (0 if keyword_asked else _thing_until(span)), _which_thing(span)
    runs: list[list[tuple[int, Token]]] = []
    unread = {word.lower() for part in span.unread for word in part.split()}  # listed as not read
    content = {t for t in span.content if t.written.lower() not in unread and not reading.leaving_at(t.start)}
    for index, token in enumerate(span.tokens):
        word = token.word
        if (
            token not in content
            or len(word) < 3
            or word.isdigit()
            or index > about
            or token.start < verb_until
        ):
            continue
        if _corrected_to_a_topic(token):
            word = token.written.lower()  # "shopped" read as "stopped" explains nothing: a typo fixes asks
        if quantity(span, index):  # "how much VAT": what is measured must be a record's, or an ask
            explained = _asks(word) or word in held or word in LIGHT_WORDS
        else:
            # the thing asked for ("which courier", "her twitter handle") must be a record's
            thing = index < thing_until or index == which or _theirs_asked(span, index)
            known = held if thing else held | searched
            explained = (
                _asks(word)
                or word in in_phrases
                or word in GENERIC_WORDS
                or word in LIGHT_WORDS
                or word in REQUEST_WORDS
                or word in known
                or (keyword_asked and word in TOPIC_WORDS)  # "damaged" qualifies an ask of tickets
                or (keyword_asked and word in phrase_words())  # "issues raised by": a phrase's word
                or word in eligibility  # "£38 back on ORD-10451, acceptable?": whether the check passes
            )
        if explained:
            continue
        if runs and runs[-1][-1][0] == index - 1:  # neighbours make one run
            runs[-1].append((index, token))
        else:
            runs.append([(index, token)])
    return runs


def _used_words(task: PlannedTask) -> set[str]:
    """The words a task's arguments use. In a search text, only words or a slip from one ("diference"):
    "damgd" finds nothing, so searching for it explains nothing (a name, an id, a date is used as it is)."""
    kinds = tool_arguments().get(f"{task.source}.{task.tool}", {})
    words: set[str] = set()
    for name, value in task.arguments.items():
        text = kinds.get(name) is not None and kinds[name].kind == "text"
        words |= {
            word
            for word in str(value).lower().split()
            if not text or word in TOPIC_WORDS or _asks(word) or is_english(word.strip("'")) or correct(word)
        }
    return words


def _verb_until(span: Span, reading: Reading, checked: set[object]) -> int:
    """An order and an amount are a refund check, whatever the verb ("credit £45 to ORD-10031"): the
    words before the amount are its verb (where it starts is returned); what follows is read as any
    other words are."""
    amounts = (m.start for m in reading.mentions_in(span) if m.kind == "amount" and m.value in checked)
    return next(amounts, span.start)


def _about_from(span: Span, asks: bool) -> int:
    """Where "about", "re", "regarding" start what an ask of tickets or policies, or of someone named,
    is about ("complaints about rude drivers", "case for jane.doe@example.com re the milk jug"); in a
    clause that asks nothing else it is the ask ("tell me about the phone number"): no such place."""
    if asks:
        for index, token in enumerate(span.tokens):
            after_what = index and span.tokens[index - 1].word in {"what", "how"}  # "what about X" asks X
            if token.word in ABOUT_WORDS and not after_what:
                return index
    return len(span.tokens)


def _unread(span: Span) -> list[Unplanned]:
    why = "not understood: written in a language, script or symbols the planner does not read"
    return [Unplanned(f"'{part}'", why, _REPHRASE) for part in span.unread]


def _theirs_asked(span: Span, index: int) -> bool:
    """Whether the word at ``index`` is a thing of someone's asked for ("her twitter handle"), not one
    told of ("missing its lid", "the handle's broken")."""
    told = span.tokens[index - 1].word == "its" if index else False
    return possessed(span, index) and not told and not any(t.word in SYMPTOM_WORDS for t in span.tokens)


def _which_thing(span: Span) -> int:
    """In "which courier collects the returns", "what colour is it": the thing asked for, right after
    the question word (its index, else -1). Searching for it does not answer it: a record must hold it."""
    words = [token.word for token in span.tokens]
    return next(
        (
            i + 1
            for i, word in enumerate(words[:-1])
            if word in {"which", "what"} and words[i + 1] not in STOPWORDS
        ),
        -1,
    )


def _thing_until(span: Span) -> int:
    """In a clause no keyword asks, where "of/for/on" ends the thing asked for ("stock levels on the
    burr grinder"): its words being searched for does not answer it. A preposition with nothing after
    it is a verb's particle ("won't turn on")."""
    last = len(span.tokens) - 1
    ends = (
        i for i, t in enumerate(span.tokens) if t.word in {"of", "for", "on"} and (i < last or span.names)
    )
    return next(ends, 0)


class _Around:
    """What a clause's neighbours say of it: whether its clause (with the part after a thing named in
    it) asks and asks for a search, and whether its sentence names someone or something."""

    def __init__(self, spans: list[Span], text: str) -> None:
        self.asking: dict[int, bool] = {}
        self.searching: dict[int, bool] = {}
        for group in clauses(spans):
            asking = any(_asking(spans[i]) for i in group)
            searching = bool(intents_taking("text") & {intent for i in group for intent in spans[i].asked})
            for i in group:
                self.asking[i], self.searching[i] = asking, searching
        self.named = {
            i: any(spans[j].names for j in group) for group in sentences(spans, text) for i in group
        }
        self.questions = {i: span.question for i, span in enumerate(spans)}

    def describes(self, index: int) -> bool:
        """Whether the clause's words are what to search for. Search words explain a clause whose
        group asks something, not one that asks nothing ("stock levels on the grinder, plus tickets");
        a statement's words describe what to search for, and so do a question's when it asks for a
        search ("does a cracked water tank qualify as damaged?"); in any other question every word must
        be read ("what's the drill if a parcel shows up in bits?")."""
        return self.asking[index] and (not self.questions[index] or self.searching[index])


def _asking(span: Span) -> bool:
    """Whether a clause asks by itself: it names something, a keyword or the matcher reads an ask in
    it, or it names a product or a symptom (which the planner researches in tickets and policies)."""
    return span.role == ASKS and (
        span.names
        or bool(span.asked)
        or any(_asks(t.word) for t in span.tokens)
        or (span.match is not None and span.match.understood)
        # a product or a symptom stated ("kettle leaking from the base"); asked about in a question
        # whose ask no keyword reads ("what's the drill if a parcel..."), it is not the ask
        or (not span.question and any(t.word in TOPIC_WORDS for t in span.tokens))
    )


def _action(span: Span) -> str:
    """The clause as written where it opens with a verb that asks for something to be done ("reset
    his password", "pls send out a replacement jug"), else ""."""
    words = [token.word for token in span.tokens]
    first = next((i for i, word in enumerate(words) if word not in ACTION_OPENERS), None)
    if first is None:
        return ""
    verb, after = words[first], words[first + 1 : first + 2]
    # A verb, not a noun: something follows it as its object ("reset his password", "cancel ORD-1",
    # "close ticket TCK-20051": an id of a kind no tool takes); "phone number", "change of address"
    # name things.
    if not (span.names or unknown_ids(span.text) or (after and after[0] in ACTION_OBJECTS)):
        return ""
    # "send me her invoices", "send the invoices over" deliver what is found; "send out a replacement" acts
    thing = next((w for w in words[first + 1 :] if w not in STOPWORDS or w == "out"), "")
    sends_out = verb == "send" and not _asks(thing) and after != ["me"]
    return span.text if verb in ACTION_VERBS or sends_out else ""


def _corrected_to_a_topic(token: Token) -> bool:
    """A word typo correction turned into a word that only describes ("shopped" into "stopped"):
    corrections are trusted to fix the words that ask ("refudn", "tikets"), not to explain others."""
    written = token.written.lower().removesuffix("'s")
    trusted = _asks(token.word) or token.word in phrase_words() or token.word in record_words()
    return written != token.word and not trusted


@functools.cache
def _intent_words() -> frozenset[str]:
    return frozenset().union(*(intent.words | intent.weak_words for intent in INTENTS))


def _asks(word: str) -> bool:
    return word in _intent_words()


def _held_words(tasks: list[PlannedTask]) -> set[str]:
    """The words naming the fields of the records the planned tasks return, and the values those fields
    take ("delivered", "total", "cancelled"), and the words of the tools' own names."""
    fields = record_fields()
    words: set[str] = set()
    for task in tasks:
        words.update(task.tool.split("_"))  # what a tool is named for it gives: get_current_time, the time
        for name, field in fields.get(task.source, {}).get(task.tool, {}).items():
            for term in (name, *field["values"]):  # "status", and "cancelled", a value it takes
                words.update(term.split("_"))
            if name.endswith("_on"):
                words.update({"date", "when"})  # placed_on, delivered_on: a date
    return words


def _listed(span: Span, run: list[tuple[int, Token]], query: str) -> Unplanned:
    """A run of words nothing accounts for, as written in ``query``: no source holds it, or not understood."""
    last = run[-1][1]
    written = " ".join(query[run[0][1].start : last.start + len(last.written)].split())
    first = run[0][0]
    if asks_for_a_thing(span, first) or first == _which_thing(span) or _theirs_asked(span, first):
        return Unplanned(
            f"'{written}'",
            "no source holds this: no record any tool returns has such a field",
            "ask for what the sources' records hold (each tool's output schema lists its fields)",
        )
    nearest = span.match
    reading = ""
    if nearest is not None and not nearest.understood:
        how = (
            f"{nearest.score:.2f} similar, under the {THRESHOLD:.2f} needed"
            if nearest.supported
            else "which shares none of its words' meaning"
        )
        reading = f"; the nearest phrasing known is '{nearest.example}' ({nearest.intent}), {how}"
    return Unplanned(f"'{written}'", f"not understood: no keyword reads it{reading}", _REPHRASE)


def _text_of(span: Span) -> str:
    return " ".join(token.word for token in span.tokens)


def _tasks_of(span: Span, reading: Reading, tasks: list[PlannedTask]) -> tuple[str, ...]:
    """The tasks a span asks for: those using what it names, and those of the intents it asks."""
    named = {str(m.value) for m in reading.mentions_in(span)}
    intents = {intent.name for intent in INTENTS if intent.words & {t.word for t in span.tokens}}
    intents |= {i.name for i in INTENTS if any(p in _text_of(span) for p in i.phrases)}
    if span.match is not None and span.match.understood:
        intents.add(span.match.intent)
    tools = {
        tool.strip()
        for intent in INTENTS
        if intent.name in intents
        for entry in intent.tools
        for tool in entry.split("|")
    }
    return tuple(
        task.id
        for task in tasks
        if f"{task.source}.{task.tool}" in tools or named & {str(value) for value in task.arguments.values()}
    )


def _how(span: Span, reading: Reading) -> str:
    aliases = [m.text for m in reading.context if m.kind == "name" and span.start <= m.start < span.end]
    if aliases:
        return f"the customer's name ({', '.join(aliases)}), beside their email or id"
    if span.match is not None:
        verdict = (
            "taken"
            if span.match.understood
            else "too far to take"
            if span.match.supported
            else "no word in common"
        )
        return (
            f"matcher: nearest '{span.match.example}' ({span.match.intent}) {span.match.score:.2f}, {verdict}"
        )
    return "keywords" if any(token.word not in STOPWORDS for token in span.tokens) else "names"


def _context(span: Span, reading: Reading) -> str:
    if span.role == COURTESY:
        return "greeting, thanks or filler"
    dates = [m.describe() for m in reading.context if span.start <= m.start < span.end]
    told = "a story: context, not an ask"
    return f"{told}; its dates {', '.join(dates)} qualify nothing" if dates else told
