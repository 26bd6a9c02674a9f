"""The semantic matcher: what it takes, what it never takes, and that it stays out of start-up.

The threshold (``meaning.THRESHOLD``) was chosen on these sets: asks in words no keyword knows are read
as their intent above it; text that asks nothing a source answers (other languages, code, emoji, small
talk, fields no record holds) stays below it.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from coordinator.planning.lexicon import EXAMPLES, STOPWORDS
from coordinator.planning.meaning import THRESHOLD, nearest_intent
from coordinator.planning.reading import read_query
from tests.conftest import PROJECT_ROOT
from tests.fresh_process import in_a_fresh_process
from tests.test_head_start import STORY

ASKS_IN_OTHER_WORDS = [
    ("did she reach out to us about the grinder", "tickets"),
    ("did she ever ring us about it", "tickets"),
    ("have people moaned about the grinder", "tickets"),
    ("what is still owed on the account", "invoices"),
    ("do they have any unpaid bills", "invoices"),
    ("anything outstanding on their bills", "invoices"),
    ("can we do a goodwill gesture", "refund"),
    ("by when must they send it back", "policies"),
    ("are we allowed to swap it", "policies"),
    ("has it shipped yet", "orders"),
    ("is he a vip", "customer"),
]
ASKS_NOTHING = [
    "what's the weather like", "bonjour je voudrais un remboursement", "wie lange dauert die lieferung",
    "¿dónde está mi pedido?", "lol ok", "tracking number", "courier", "phone number", "date of birth",
    "is the sky blue", "the cat sat on the mat", "make me a sandwich", "what time is it in tokyo",
    "is she happy with us overall", "print hello world", "the meaning of life", "total revenue across all customers", "😀😀😀", "12345",
]  # fmt: skip


def _unknown(text: str) -> list[str]:
    """The words of ``text`` the keywords leave unexplained, as the reader passes them."""
    from coordinator.planning.reading import _known_words

    return [w for w in text.lower().split() if w not in _known_words() and w not in STOPWORDS]


@pytest.mark.parametrize(("text", "intent"), ASKS_IN_OTHER_WORDS)
def test_an_ask_in_other_words_is_read_as_its_intent(text: str, intent: str) -> None:
    match = nearest_intent(text, _unknown(text) or text.split())
    assert match is not None and match.intent == intent and match.understood, match


def test_a_question_of_measure_is_not_read_through_its_measure_word() -> None:
    """ "how long" asks a duration of whatever follows: "how long has cust 27 been with us" shares
    "long" with "how long is the guarantee" and nothing else, so it is not read as a warranty ask."""
    text = "how long has cust 27"
    match = nearest_intent(text, ["long"])
    assert match is not None and not match.understood, match


@pytest.mark.parametrize("text", ASKS_NOTHING)
def test_text_that_asks_nothing_a_source_answers_is_never_taken(text: str) -> None:
    """Under the threshold, or near an example only through function words ("happy with us" and
    "called us"): nothing is taken."""
    match = nearest_intent(text, _unknown(text) or text.split())
    assert match is None or not match.understood, match
    assert match is None or match.score < THRESHOLD or not match.supported, match


def test_every_example_is_its_own_intent() -> None:
    for intent, examples in EXAMPLES.items():
        for example in examples:
            match = nearest_intent(example, example.split())
            assert match is not None and match.intent == intent and match.score > 0.99, (example, match)


@pytest.mark.parametrize(
    "query",
    [
        "これは何ですか ORD-10031",
        "ORD-10031. 🙃🔥",
        "что с заказом ORD-10031?",
        "SELECT * FROM orders WHERE id = 'ORD-10031'; DROP TABLE orders;",
        "def refund(order): return order.total  # ORD-10031",
        "bonjour, je voudrais un remboursement pour ORD-10031",
    ],
)
def test_a_span_the_matcher_cannot_read_is_not_understood_never_a_crash(query: str) -> None:
    from coordinator.planning.planner import plan_query

    plan = plan_query(query)
    assert plan.unplanned, plan.describe()
    assert any(span.role != "asks" or span.tasks for span in plan.spans)


def test_help_and_a_usage_error_never_load_the_matcher() -> None:
    probe = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from coordinator.cli import app\n"
        "runner = CliRunner()\n"
        "runner.invoke(app, ['--help'])\n"
        "runner.invoke(app, ['plan', ''])\n"
        "runner.invoke(app, ['plan', 'orders of CUST-00042'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('wordllama', 'tokenizers', 'safetensors')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_query_the_keywords_read_whole_never_loads_the_matcher() -> None:
    read = read_query("orders and open tickets of CUST-00042 since last month")
    assert all(span.match is None for span in read.spans)


@pytest.mark.parametrize(
    ("query", "loads"),
    [
        # "whether a £750": function words beside an ask the keywords read (a refund, allowed)
        (STORY, False),
        # "what can we do for her": function words that are the sentence's only ask
        ("Jane Doe (jane.doe@example.com) wrote in again. What can we do for her?", True),
    ],
)
def test_function_words_are_compared_by_meaning_only_where_nothing_else_asks(query: str, loads: bool) -> None:
    """The matcher (0.35 s to load) is the story's critical path otherwise: its "whether a" could at
    most confirm the refund its sentence's keywords read."""
    loaded = in_a_fresh_process(f"""
        import json, sys
        from coordinator.planning.planner import plan_query
        plan_query({query!r})
        print(json.dumps("wordllama" in sys.modules))
    """)
    assert loaded is loads


def test_loading_the_matcher_leaves_the_logging_as_it_was() -> None:
    """wordllama configures the root logger at INFO when imported; the matcher puts it back, so no
    library's INFO lines (each HTTP request an SDK makes) reach stderr."""
    code = (
        "import logging; before = (logging.getLogger().level, len(logging.getLogger().handlers)); "
        "from coordinator.planning.meaning import nearest_intent; nearest_intent('been in touch', ['touch']); "
        "after = (logging.getLogger().level, len(logging.getLogger().handlers)); "
        "logging.getLogger('httpx2').info('HTTP Request: POST'); print(before == after)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "True" and "HTTP Request" not in done.stderr, done.stderr
