"""Log lines redacted as spans are: what a process logs (its messages, and the tracebacks they carry)
goes through ``traces.redact.for_trace`` before it is written, to stderr or to a log file."""

from __future__ import annotations

import logging

from traces.redact import for_trace

__all__ = ["RedactingFormatter", "redact_last_resort"]


class RedactingFormatter(logging.Formatter):
    """A formatter whose whole line (message, arguments, traceback) is redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return str(for_trace(super().format(record)))


def redact_last_resort() -> None:
    """A process that configures no logging prints warnings through ``logging.lastResort``: redacted too,
    and still the bare message it was."""
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(RedactingFormatter())
