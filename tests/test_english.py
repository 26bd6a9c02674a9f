"""The English word list behind the planner, and what a query loads of it and of Faker's names."""

from __future__ import annotations

from coordinator.planning.english import NOT_IN_THE_LIST, in_the_list, is_english
from coordinator.planning.lexicon import STOPWORDS
from tests.fresh_process import in_a_fresh_process
from tests.test_head_start import STORY


def test_the_function_words_the_list_lacks_are_named() -> None:
    """``is_english`` answers a function word without the list: right only while this holds. A function
    word added to the planner that the list lacks is to be added to ``NOT_IN_THE_LIST``."""
    assert {word for word in STOPWORDS if not in_the_list(word)} == NOT_IN_THE_LIST
    assert all(is_english(word) == in_the_list(word) for word in STOPWORDS)


def test_reading_the_story_query_loads_neither_the_word_list_nor_fakers_names() -> None:
    """Its words are all the planner's own or function words: nothing to look up in either."""
    loaded = in_a_fresh_process(f"""
        import json, sys
        from coordinator.planning import reading
        reading.read_query({STORY!r})
        print(json.dumps([name for name in ("spellchecker", "faker") if name in sys.modules]))
    """)
    assert loaded == []
