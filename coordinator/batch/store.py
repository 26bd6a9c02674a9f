"""A batch's output folder.

    DIR/reports/ID.json    the question's report, the same JSON as `research ask --json`
    DIR/failed/ID.json     a question that could not be researched: {"id", "query", "error"}
    DIR/checks/ID.json     what the chaos checker found wrong with the report, if anything
    DIR/traces/            the spans, one trace per question (its id is the report's trace_id)
    DIR/summary.json       the batch's figures (``coordinator.batch.summary``)

Each file is published whole (``traces.private_files.publish_file``: a 0600 draft created
exclusively, flushed to disk, renamed over), so it is whole or absent: a batch killed at any instant
leaves only finished reports, and a rerun with ``--resume`` skips every question that has one (read
as far as it is trusted: ``coordinator.batch.trusted``). A failed question is tried again by a
rerun. The folders are made 0700: reports hold what the sources said of customers.

A folder holding a symbolic link where the batch writes or reads (DIR itself, its folders and
summary.json, anything in its folders) is refused before anything is written (``LinkRefused``):
a link planted there would have the reports written, or a forged report read, somewhere else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traces.private_files import private_folder, publish_file

__all__ = ["BatchDir", "EarlierRun", "LinkRefused"]

_FOLDERS = ("reports", "failed", "checks", "traces")  # what the batch writes into, and reads back


class EarlierRun(ValueError):
    """The batch's folder holds an earlier batch's files and ``--resume`` was not given; the message
    says what is there and the two ways on, after the folder's name."""


class LinkRefused(ValueError):
    """The batch's folder is, or holds, a symbolic link where the batch would write or read; the
    message says which, after the folder's name ("is a symbolic link ...", "holds ...")."""


@dataclass(frozen=True)
class BatchDir:
    root: Path

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    def prepare(self, *, resume: bool) -> None:
        """The folder and its folders, private; ``LinkRefused`` before any is made or written to
        when one of them, or anything in them, is a symbolic link; ``EarlierRun`` when an earlier
        batch wrote into it, unless ``resume``."""
        self._refuse_links()
        earlier = None if resume or not self.root.is_dir() else self.earlier_run()
        if earlier is not None:
            raise EarlierRun(
                f"holds an earlier batch ({earlier}): add --resume to carry on with it (its reports "
                "kept, the other questions asked), or name another --out"
            )
        for folder in (self.root, self.root / "reports", self.root / "failed", self.root / "checks"):
            private_folder(folder)

    def _refuse_links(self) -> None:
        if self.root.is_symlink():
            raise LinkRefused(
                f"is a symbolic link (to {os.readlink(self.root)}); the batch writes into "
                "a folder itself, never through a link: name the folder it points to, or a new one"
            )
        if not self.root.is_dir():
            return  # nothing there yet (made by prepare), or not a folder (prepare says so)
        found = [self.root / name for name in (*_FOLDERS, "summary.json")]
        for folder in (self.root / name for name in _FOLDERS):
            if folder.is_dir() and not folder.is_symlink():
                found += sorted(folder.iterdir())
        for path in found:
            if path.is_symlink():
                raise LinkRefused(
                    f"holds a symbolic link, {path} (to {os.readlink(path)}); the batch "
                    "never writes or reads through one: remove it, or name another folder"
                )

    def report_path(self, question_id: str) -> Path:
        return self.root / "reports" / f"{question_id}.json"

    def failure_path(self, question_id: str) -> Path:
        return self.root / "failed" / f"{question_id}.json"

    def checks_path(self, question_id: str) -> Path:
        return self.root / "checks" / f"{question_id}.json"

    def earlier_run(self) -> str | None:
        """What an earlier batch left here ("summary.json, 3 reports, traces"), None when nothing:
        a folder is resumed only on purpose (``--resume``), never by finding files in it."""
        found = ["summary.json"] if (self.root / "summary.json").exists() else []
        for name, kind in (
            ("reports", "reports"),
            ("failed", "failures"),
            ("checks", "checks"),
            ("traces", ""),
        ):
            folder = self.root / name
            count = sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0
            if count:
                found.append(f"{count} {kind}" if kind else name)
        return ", ".join(found) or None

    def write_report(self, question_id: str, report_json: str) -> None:
        _write(self.report_path(question_id), report_json)
        self.failure_path(question_id).unlink(missing_ok=True)

    def write_failure(self, question_id: str, query: str, error: str) -> None:
        _write(
            self.failure_path(question_id),
            json.dumps({"id": question_id, "query": query, "error": error}, indent=2),
        )

    def write_violations(self, question_id: str, violations: list[tuple[str, str]]) -> None:
        path = self.checks_path(question_id)
        if not violations:
            path.unlink(missing_ok=True)
            return
        listed = [{"invariant": name, "what": what} for name, what in violations]
        _write(path, json.dumps(listed, indent=2))

    def write_summary(self, summary: dict[str, Any]) -> None:
        _write(self.root / "summary.json", json.dumps(summary, indent=2))


def _write(path: Path, text: str) -> None:
    publish_file(path, text, replace=True)
