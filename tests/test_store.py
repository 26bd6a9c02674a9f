"""The sources' SQLite connections are closed, never left to the garbage collector (Python 3.13 warns
of each one left open, and the suite turns warnings into errors)."""

from __future__ import annotations

import gc
import sqlite3
import threading
import warnings

import pytest

from sources.settings import SourceSettings
from sources.store import Store
from sources.world import world_path


def _orders(settings: SourceSettings) -> Store:
    return Store(world_path(settings.data_dir, settings.seed) / "orders.db")


def _is_closed(connection: sqlite3.Connection) -> bool:
    try:
        connection.total_changes  # noqa: B018 (any use of a closed connection raises)
    except sqlite3.ProgrammingError as error:
        assert "closed" in str(error), error
        return True
    return False


def _connection_of_a_thread(store: Store) -> sqlite3.Connection:
    """The connection a thread of its own queried through, once that thread has ended."""
    used: list[sqlite3.Connection] = []

    def query() -> None:
        assert store.rows("SELECT 1 AS one") == [{"one": 1}]
        used.append(store._connection(write=False))

    thread = threading.Thread(target=query)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    return used[0]


def test_the_connection_of_an_ended_thread_is_closed_by_the_next_one_opened(settings: SourceSettings) -> None:
    store = _orders(settings)
    ended = _connection_of_a_thread(store)
    assert not _is_closed(ended)  # kept by the store, not dropped with the thread
    store.rows("SELECT 1")  # this thread's first query opens its connection
    assert _is_closed(ended)
    store.close()


def test_close_closes_every_connection_and_a_later_query_opens_new_ones(settings: SourceSettings) -> None:
    store = _orders(settings)
    store.rows("SELECT 1")
    with store.transaction() as writing:
        pass
    reading = store._connection(write=False)
    store.close()
    assert _is_closed(reading) and _is_closed(writing)
    assert store.rows("SELECT 1 AS one") == [{"one": 1}]
    store.close()


def test_a_store_dropped_unclosed_closes_its_connections(settings: SourceSettings) -> None:
    store = _orders(settings)
    store.rows("SELECT 1")
    reading = store._connection(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        del store
        gc.collect()
    assert _is_closed(reading)


@pytest.fixture(autouse=True)
def _collected() -> None:
    gc.collect()  # a store another test dropped is finalized before this one counts connections
