"""A batch's --out trusted only as far as it should be: an earlier batch's folder is resumed on purpose
(``--resume``) or refused; a file in it is used only if this project wrote it for that question; and
every question of the file is counted once in the summary."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from coordinator.batch.questions import Question
from coordinator.batch.store import BatchDir
from coordinator.batch.summary import Tally, summarize
from coordinator.batch.trusted import UntrustedFile, kept
from coordinator.reporting.report import ResearchReport
from sources.processes.fleet import Fleet
from sources.settings import SourceSettings
from tests.test_batch import QUESTIONS, in_process, run_batch_command, write_questions


@pytest.fixture
def no_fleet_left(settings: SourceSettings) -> Iterator[None]:
    """A batch that was not refused starts a fleet (as the code before this did): stopped after."""
    yield
    Fleet(settings).down()


def report_json(query: str, status: str = "complete") -> str:
    """A report as the project writes it (`research ask --json`, a batch's reports/ID.json)."""
    return ResearchReport(
        query=query,
        trace_id="0" * 32,
        status=status,
        answer="",
        findings=[],
        tasks=[],
        gaps=[],
        escalations=[],
    ).to_json()


def files_in(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def the_line(stderr: str) -> str:
    (line,) = stderr.strip().splitlines()
    assert "Traceback" not in stderr
    return line


# --- an earlier batch's folder --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("planted", "named"),
    [
        ({"summary.json": '{"questions": 40}'}, "summary.json"),
        ({"reports/q001.json": report_json(QUESTIONS[0])}, "1 reports"),
        ({"failed/q002.json": '{"id": "q002"}'}, "1 failures"),
        ({"traces/research-coordinator-1.jsonl": "{}\n"}, "traces"),
    ],
)
def test_an_out_an_earlier_batch_wrote_into_is_refused_without_resume_and_left_as_it_was(
    settings: SourceSettings, tmp_path: Path, no_fleet_left: None, planted: dict[str, str], named: str
) -> None:
    out = tmp_path / "out"
    for name, text in planted.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    before = files_in(out)
    done = in_process(settings, str(write_questions(tmp_path, QUESTIONS[:2])), "--out", str(out))
    assert done.exit_code == 2, done.stderr
    line = the_line(done.stderr)
    assert line.startswith(f"error: --out {out} holds an earlier batch ("), line
    assert named in line and "add --resume to carry on with it" in line and "or name another --out" in line
    assert files_in(out) == before  # the summary not overwritten, nothing added


# --- a file in it that this project did not write for its question --------------------------------

CORRUPT = '{"format": "research-report/1", "query": "Orders of'  # cut short
FOREIGN = json.dumps({"status": "complete", "query": QUESTIONS[0], "gaps": []})  # no marker
UNMARKED = json.dumps({k: v for k, v in json.loads(report_json(QUESTIONS[0])).items() if k != "format"})


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("reports/q001.json", CORRUPT, "is not JSON (Unterminated string"),
        ("reports/q001.json", FOREIGN, 'is JSON without "format": "research-report/1"'),
        ("reports/q001.json", UNMARKED, 'is JSON without "format": "research-report/1"'),
        ("reports/q001.json", json.dumps({"format": "research-report/1"}), "is not a whole report (query:"),
        ("reports/q001.json", report_json("Invoices of CUST-00011"), "is for another question ('Invoices of"),
        ("reports/q001.json", b"\xff\xfe", "cannot be read ("),
        ("failed/q002.json", "[", "is not JSON ("),
        ("failed/q002.json", json.dumps({"id": "q001", "query": QUESTIONS[1], "error": "x"}), "is the failure of 'q001'"),
        ("checks/q001.json", '{"invariant": "x"}', "is JSON other than the checker's findings"),
    ],
)  # fmt: skip
def test_a_file_this_project_did_not_write_for_its_question_is_refused_in_one_line_under_resume(
    settings: SourceSettings, tmp_path: Path, no_fleet_left: None, name: str, text: str | bytes, said: str
) -> None:
    out = tmp_path / "out"
    (out / "reports").mkdir(parents=True)
    (out / "reports" / "q001.json").write_text(report_json(QUESTIONS[0]))  # a good one, beside it
    (out / name).parent.mkdir(exist_ok=True)
    (out / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    before = files_in(out)
    done = in_process(settings, str(write_questions(tmp_path, QUESTIONS[:2])), "--out", str(out), "--resume")
    assert done.exit_code == 2, done.stderr
    line = the_line(done.stderr)
    assert line.startswith(f"error: {out / name} {said}"), line
    assert line.endswith("so the batch neither uses nor overwrites it; remove it, or name another --out"), (
        line
    )
    assert files_in(out) == before


def test_a_resumed_batch_asks_only_what_has_no_report_and_counts_each_question_once(
    settings: SourceSettings, tmp_path: Path, no_fleet_left: None
) -> None:
    out = tmp_path / "out"
    out.mkdir()  # the questions file beside its reports (`research batch runs/x/q.jsonl --out runs/x`)
    first = run_batch_command(settings, str(write_questions(out, [QUESTIONS[0]])), "--out", str(out))
    assert first.returncode == 0, first.stderr  # a file of the user's in --out is no earlier batch
    (out / "reports" / "other.json").write_text("not a question of this file: not read")
    questions = write_questions(tmp_path, [QUESTIONS[0], QUESTIONS[2], "what is the weather"])
    done = run_batch_command(settings, str(questions), "--out", str(out), "--resume")
    assert done.returncode == 3, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["this_run"]["questions"] == 2  # q001 not asked again
    assert (summary["questions"], summary["resumed"], summary["answered"], summary["failed"]) == (3, 1, 2, 1)
    assert summary["partial"] == summary["not_started"] == 0
    assert "resumed (reports of an earlier run)" in done.stdout


# --- every question counted once, whatever the folder held ------------------------------------

KINDS = ("none", "complete", "partial", "failure", "corrupt", "foreign", "mismatched")
UNTRUSTED = ("corrupt", "foreign", "mismatched")
OUTCOMES = ("complete", "partial", "failed", "not reached")  # of a question this run asks


def plant(folder: BatchDir, question: Question, kind: str, where: str) -> Path | None:
    """A file of ``kind`` for ``question``, as an earlier run (or someone else) left it; its path."""
    texts = {
        "complete": report_json(question.query, "complete"),
        "partial": report_json(question.query, "partial"),
        "failure": json.dumps({"id": question.id, "query": question.query, "error": "no plan"}),
        "corrupt": report_json(question.query)[:40],
        "foreign": json.dumps({"id": question.id, "query": question.query, "status": "complete"}),
        "mismatched": report_json(question.query + " (as it was asked before)"),
    }
    if kind == "none":
        return None
    path = {"reports": folder.report_path, "failed": folder.failure_path, "checks": folder.checks_path}[
        "failed" if kind == "failure" else "reports" if kind in ("complete", "partial") else where
    ](question.id)
    path.write_text(texts[kind])
    return path


@examples(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Orders of CUST-00042?", "Tickets for CUST-00007", "x"]),  # texts may repeat
            st.sampled_from(KINDS),
            st.sampled_from(["reports", "failed", "checks"]),  # where an untrusted file is planted
            st.sampled_from(OUTCOMES),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_every_question_is_counted_once_whatever_the_folder_held(
    cases: list[tuple[str, str, str, str]],
) -> None:
    questions = [Question(id=f"q{number}", query=text) for number, (text, *_) in enumerate(cases)]
    with tempfile.TemporaryDirectory() as scratch:
        folder = BatchDir(Path(scratch) / "out")
        folder.prepare(resume=True)
        planted = [
            plant(folder, q, kind, where) for q, (_, kind, where, _) in zip(questions, cases, strict=True)
        ]
        untrusted = [path for path, (_, kind, *_) in zip(planted, cases, strict=True) if kind in UNTRUSTED]
        if untrusted:  # the first, in the questions' order, is named; nothing is read as an answer
            with pytest.raises(UntrustedFile) as refused:
                kept(folder, questions)
            assert str(refused.value).startswith(f"{untrusted[0]} ")
            return
        resumed = kept(folder, questions).reports
        assert set(resumed) == {
            q.id for q, case in zip(questions, cases, strict=True) if case[1] in ("complete", "partial")
        }
        tally = Tally(resumed=len(resumed))
        for question, (_, _, _, outcome) in zip(questions, cases, strict=True):
            if question.id in resumed or outcome == "not reached":
                continue
            if outcome == "failed":
                folder.write_failure(question.id, question.query, "no plan")
            else:
                folder.write_report(question.id, report_json(question.query, outcome))
            tally.add(outcome, 0)
        summary = summarize(folder, tally, questions=questions, wall_s=1.0, engine="local")
    states = []  # each question's one state, worked out from what was planted and what this run did
    for question, (_, kind, _, outcome) in zip(questions, cases, strict=True):
        if question.id in resumed:
            states.append(kind)
        elif outcome != "not reached":
            states.append(outcome)
        else:  # its turn did not come: a failure an earlier run left still stands
            states.append("failed" if kind == "failure" else "not reached")
    counted = ("answered", "partial", "failed", "not_started")
    assert sum(summary[count] for count in counted) == summary["questions"] == len(questions)
    assert summary["answered"] == states.count("complete") and summary["partial"] == states.count("partial")
    assert summary["failed"] == states.count("failed") and summary["not_started"] == states.count(
        "not reached"
    )
    assert summary["resumed"] == len(resumed) <= summary["answered"] + summary["partial"]
    ran = [
        case
        for q, case in zip(questions, cases, strict=True)
        if q.id not in resumed and case[3] != "not reached"
    ]
    assert summary["this_run"]["questions"] == len(ran)
