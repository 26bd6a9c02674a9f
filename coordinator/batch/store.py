"""A batch's output folder.

    DIR/reports/ID.json    the question's report, the same JSON as `research ask --json`
    DIR/failed/ID.json     a question that could not be researched: {"id", "query", "error"}
    DIR/checks/ID.json     what the chaos checker found wrong with the report, if anything
    DIR/traces/            the spans, one trace per question (its id is the report's trace_id)
    DIR/summary.json       the batch's figures (``coordinator.batch.summary``)

Each file is published whole (``traces.private_files.publish_file``: a 0600 draft created
exclusively, flushed to disk, renamed over), so it is whole or absent: a batch killed at any instant
leaves only finished reports, and a rerun skips every question that has one. A failed question is
tried again by a rerun. The folders are made 0700: reports hold what the sources said of customers.

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

__all__ = ["BatchDir", "LinkRefused"]

_FOLDERS = ("reports", "failed", "checks", "traces")  # what the batch writes into, and reads back


class LinkRefused(ValueError):
    """The batch's folder is, or holds, a symbolic link where the batch would write or read; the
    message says which, after the folder's name ("is a symbolic link ...", "holds ...")."""


@dataclass(frozen=True)
class BatchDir:
    root: Path

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    def prepare(self) -> None:
        """The folder and its folders, private; ``LinkRefused`` before any is made or written to
        when one of them, or anything in them, is a symbolic link."""
        self._refuse_links()
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

    def answered(self) -> set[str]:
        """The ids of the questions whose report is written."""
        return {path.stem for path in (self.root / "reports").glob("*.json")}

    def write_report(self, question_id: str, report_json: str) -> None:
        _write(self.report_path(question_id), report_json)
        (self.root / "failed" / f"{question_id}.json").unlink(missing_ok=True)

    def write_failure(self, question_id: str, query: str, error: str) -> None:
        _write(
            self.root / "failed" / f"{question_id}.json",
            json.dumps({"id": question_id, "query": query, "error": error}, indent=2),
        )

    def write_violations(self, question_id: str, violations: list[tuple[str, str]]) -> None:
        path = self.root / "checks" / f"{question_id}.json"
        if not violations:
            path.unlink(missing_ok=True)
            return
        listed = [{"invariant": name, "what": what} for name, what in violations]
        _write(path, json.dumps(listed, indent=2))

    def reports(self) -> dict[str, dict[str, Any]]:
        """Every written report, by question id."""
        return self._read("reports")

    def failures(self) -> dict[str, dict[str, Any]]:
        return self._read("failed")

    def violations(self) -> dict[str, list[dict[str, str]]]:
        return self._read("checks")

    def _read(self, folder: str) -> dict[str, Any]:
        """Each file of ``folder`` as JSON, by question id (its name)."""
        files = sorted((self.root / folder).glob("*.json"))
        return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in files}

    def write_summary(self, summary: dict[str, Any]) -> None:
        _write(self.root / "summary.json", json.dumps(summary, indent=2))


def _write(path: Path, text: str) -> None:
    publish_file(path, text, replace=True)
