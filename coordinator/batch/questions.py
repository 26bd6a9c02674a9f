"""The questions of a batch: a JSON-lines file (``{"id": "...", "query": "..."}`` a line, with an
optional ``deadline`` in seconds and ``grant`` scopes), or a plain text file of one question a line.

Every line is checked before anything runs: a bad line is named with its number, the field, the form
expected and an example; nothing is dropped silently. An id names the report's file, so it is a
plain name (letters, digits, ``.``, ``_``, ``-``), never a path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sources.bounds import TooLarge, read_file_at_most

__all__ = ["MAX_FILE_BYTES", "Question", "QuestionsError", "read_questions"]

_ID = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$"
# About 100,000 questions of 150 characters: a batch bigger than that is several batches.
MAX_FILE_BYTES = 16 * 2**20
_EXAMPLE = '{"id": "case-1", "query": "Orders of CUST-00042?", "deadline": 30, "grant": ["billing:read"]}'


class QuestionsError(ValueError):
    """A questions file that cannot be run as given; the message says where and how to fix it."""


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=_ID)
    query: str = Field(min_length=1)
    deadline: float | None = Field(default=None, gt=0)
    grant: tuple[str, ...] = ()


def read_questions(path: Path) -> list[Question]:
    """The file's questions in order; ``QuestionsError`` names the first bad line (or a repeated id)."""
    try:
        # A byte-order mark (Windows editors) is not text.
        text = read_file_at_most(path, MAX_FILE_BYTES).decode("utf-8-sig")
    except TooLarge:
        raise QuestionsError(
            f"the questions file {path} is larger than {MAX_FILE_BYTES // 2**20} MB; "
            f"split it into batches, one JSON object a line, e.g. {_EXAMPLE}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionsError(f"cannot read the questions file {path}: {exc}") from None
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)]
    lines = [(number, line) for number, line in lines if line and not line.startswith("#")]
    as_json = bool(lines) and lines[0][1].startswith("{")
    questions = [_from_json(path, n, line) if as_json else _from_text(n, line) for n, line in lines]
    seen: dict[str, int] = {}
    for (number, _), question in zip(lines, questions, strict=True):
        if question.id in seen:
            raise QuestionsError(
                f"{path}:{number}: the id {question.id!r} is on line {seen[question.id]} too; "
                "each question needs an id of its own (its report is DIR/reports/ID.json)"
            )
        seen[question.id] = number
    if not questions:
        raise QuestionsError(f"{path} has no questions: one JSON object a line, e.g. {_EXAMPLE}")
    return questions


def _from_text(number: int, line: str) -> Question:
    return Question(id=f"line-{number}", query=line)


def _from_json(path: Path, number: int, line: str) -> Question:
    where = f"{path}:{number}"
    try:
        value: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise QuestionsError(f"{where}: not a JSON object ({exc.msg}); expected e.g. {_EXAMPLE}") from None
    if not isinstance(value, dict):
        raise QuestionsError(f"{where}: expected a JSON object, e.g. {_EXAMPLE}")
    if isinstance(value.get("grant"), str):
        value["grant"] = [value["grant"]]  # one scope given as a string
    try:
        return Question.model_validate(value)
    except ValidationError as exc:
        raise QuestionsError(f"{where}: {_first_problem(exc)}; e.g. {_EXAMPLE}") from None


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    field = ".".join(str(part) for part in error["loc"]) or "the line"
    if error["type"] == "missing":
        return f"the field {field!r} is missing"
    if error["type"] == "extra_forbidden":
        return f"unknown field {field!r} (the fields are id, query, deadline, grant)"
    if field == "id":
        return (
            f"the id {error.get('input')!r} is not a plain name (letters, digits, '.', '_', '-'; at most 100)"
        )
    return f"{field}: {error['msg']}"
