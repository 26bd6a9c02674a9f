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
from sources.toolkit import open_source
from sources.world import CHANGING, SOURCES, world_path


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


def test_an_immutable_store_reads_and_refuses_to_write(settings: SourceSettings) -> None:
    store = Store(world_path(settings.data_dir, settings.seed) / "orders.db", immutable=True)
    assert store.row("SELECT id FROM orders WHERE id = 'ORD-10023'") == {"id": "ORD-10023"}
    with pytest.raises(ValueError, match=r"orders\.db is read as immutable: it cannot be written"):
        store.transaction().__enter__()
    store.close()


@pytest.mark.parametrize("name", SOURCES)
def test_only_a_source_whose_data_changes_writes_it(settings: SourceSettings, name: str) -> None:
    """Billing's refunds change its file, so it reads it as any file another process may write; the
    other sources' files never change once built, and their stores read them as immutable."""
    store = open_source(name, settings, instructions="").store
    if name in CHANGING:
        with store.transaction() as connection:  # the write lock taken: a store that may write
            assert connection.in_transaction
    else:
        with pytest.raises(ValueError, match="immutable"):
            store.transaction().__enter__()
    store.close()
    assert {"billing"} == CHANGING
