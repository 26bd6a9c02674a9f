"""A batch folder's files, read only as far as they are trusted.

A file under ``reports/``, ``failed/`` or ``checks/`` named for a question of the batch is used only
if it is one this project wrote for that question: a report is JSON that carries the report's
format marker (``REPORT_FORMAT``), is a whole ``ResearchReport`` and asks the question's text; a
failure names the question's id and text; a check lists the invariants found broken. The id is the
file's name (a report is exactly what `research ask --json` prints, which holds no question id).

Anything else (not JSON, another program's JSON, the report of another question because the
questions file changed since) is never read as an answer, overwritten or dropped: ``UntrustedFile``
names the file, what it is, and the two ways on (remove it, or name another ``--out``). Files named
for no question of the batch are not read: the questions of another file, sharing the folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from coordinator.batch.questions import Question
from coordinator.batch.store import BatchDir
from coordinator.reporting.report import REPORT_FORMAT, ResearchReport

__all__ = ["Kept", "UntrustedFile", "kept"]

_SHOWN = 60  # characters of a question's text quoted in a message


class UntrustedFile(ValueError):
    """A file of the batch's folder that this project did not write for its question; one line."""

    def __init__(self, path: Path, what: str, question: Question) -> None:
        super().__init__(
            f"{path} {what}: not a file this project wrote for the question {question.id}, so the batch "
            "neither uses nor overwrites it; remove it, or name another --out"
        )


@dataclass(frozen=True)
class Kept:
    """What the folder holds for the batch's questions, every file checked, by question id."""

    reports: dict[str, dict[str, Any]]
    failures: dict[str, dict[str, Any]]
    violations: dict[str, list[dict[str, str]]]  # of the questions with a report only


def kept(folder: BatchDir, questions: list[Question]) -> Kept:
    """The reports, failures and checks of ``questions`` in ``folder``; ``UntrustedFile`` for the
    first file (in the questions' order) that is not this project's for its question."""
    reports, failures, violations = {}, {}, {}
    for question in questions:
        report = _read(folder.report_path(question.id), question, _report_problem)
        failure = _read(folder.failure_path(question.id), question, _failure_problem)
        checks = _read(folder.checks_path(question.id), question, _checks_problem)
        if report is not None:
            reports[question.id] = report
            if checks is not None:
                violations[question.id] = checks
        elif failure is not None:
            failures[question.id] = failure
    return Kept(reports, failures, violations)


def _read(path: Path, question: Question, problem: Any) -> Any:
    """The JSON of ``path``, None when there is no such file; ``UntrustedFile`` unless it is whole
    JSON of the form ``problem`` checks (which says what is wrong, or None)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise UntrustedFile(path, f"cannot be read ({exc})", question) from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UntrustedFile(
            path, f"is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", question
        ) from None
    found: str | None = problem(value, question)
    if found is not None:
        raise UntrustedFile(path, found, question)
    return value


def _report_problem(value: Any, question: Question) -> str | None:
    if not isinstance(value, dict) or value.get("format") != REPORT_FORMAT:
        return f'is JSON without "format": "{REPORT_FORMAT}"'
    try:
        ResearchReport.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"is not a whole report ({where}: {error['msg']})"
    return _other_question(value["query"], question)


def _failure_problem(value: Any, question: Question) -> str | None:
    if not isinstance(value, dict) or set(value) != {"id", "query", "error"}:
        return 'is JSON other than a failure ({"id", "query", "error"})'
    if value["id"] != question.id:
        return f"is the failure of {str(value['id'])[:_SHOWN]!r}"
    return _other_question(value["query"], question)


def _checks_problem(value: Any, question: Question) -> str | None:
    if isinstance(value, list) and all(
        isinstance(each, dict) and set(each) == {"invariant", "what"} for each in value
    ):
        return None
    return 'is JSON other than the checker\'s findings ([{"invariant", "what"}, ...])'


def _other_question(query: Any, question: Question) -> str | None:
    if query == question.query:
        return None
    return f"is for another question ({str(query)[:_SHOWN]!r}; the questions file asks {question.query[:_SHOWN]!r})"
