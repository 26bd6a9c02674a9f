"""The one error of reading a query: a module of its own, so that what only runs a plan (a ``Plan``,
a Ray worker) refers to it without loading the reader (its fuzzy matching, its tables)."""

from __future__ import annotations

__all__ = ["QueryError"]


class QueryError(ValueError):
    """The query cannot be researched as written; the message says what to do instead."""
