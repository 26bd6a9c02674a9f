"""The names of the world's customers, which whatever keeps text (traces, recordings, logs) must not
hold: read from the customers' data, for ``traces.personal.know_names``."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from sources.world import ensure_world

__all__ = ["customer_names"]


def customer_names(data_dir: Path, seed: int) -> list[str]:
    """Every customer's name in this seed's world (generated first if it is not there yet)."""
    database = ensure_world(data_dir, seed) / "customers.db"
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as connection:
        return [name for (name,) in connection.execute("SELECT name FROM customers")]
