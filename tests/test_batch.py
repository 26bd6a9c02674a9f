"""`research batch` on the local engine: the questions file, the guard's rules, and real batches
against a real HTTP fleet the batch starts and stops (reports, resume, a kill, the same reports as
`research ask`).

The Ray engine has its own module (``tests/test_batch_ray.py``): one local Ray for all its tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from coordinator.batch.questions import Question, QuestionsError, read_questions
from coordinator.batch.run import TokenPool
from coordinator.cli import app
from coordinator.reporting.report import ResearchReport
from sources.catalogue import SOURCES
from sources.processes.fleet import Fleet
from sources.settings import SourceSettings
from subagents.guard import Bulkheads
from tests.conftest import PROJECT_ROOT, RESEARCH_INTERRUPTIBLE
from tests.fake_messages_api import Conversations, FakeMessagesApi

QUESTIONS = [
    "Orders of CUST-00042?",
    "Investigate jane.doe@example.com: recent orders, open tickets",
    "Tickets for CUST-00007",
    "Is a £40 refund on ORD-10031 allowed?",
    "What is our policy on refunds?",
    "Invoices of CUST-00011",
]


def write_questions(folder: Path, queries: list[str]) -> Path:
    path = folder / "questions.jsonl"
    lines = [json.dumps({"id": f"q{number:03d}", "query": query}) for number, query in enumerate(queries, 1)]
    path.write_text("\n".join(lines) + "\n")
    return path


def batch_command(
    settings: SourceSettings,
    *args: str,
    environment: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
) -> subprocess.Popen[str]:
    """`research batch ARGS`, started as a user starts it (``prefix``: a command that runs it, as ``nsenter``)."""
    return subprocess.Popen(
        [*prefix, *RESEARCH_INTERRUPTIBLE, "batch", *args],
        env={**os.environ, **settings.child_environment(), "COLUMNS": "200", **(environment or {})},
        cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def run_batch_command(settings: SourceSettings, *args: str) -> subprocess.CompletedProcess[str]:
    process = batch_command(settings, *args)
    out, err = process.communicate(timeout=240)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def in_process(settings: SourceSettings, *args: str) -> Result:
    """`research batch` run in this process: for what is refused before any source starts."""
    return CliRunner().invoke(app, ["batch", *args], env=settings.child_environment())


@pytest.fixture
def no_fleet_left(settings: SourceSettings) -> Any:
    """Each batch stops the fleet it started; a killed one cannot, so the test stops it after."""
    yield
    Fleet(settings).down()


# --- the questions file --------------------------------------------------------------------------


def test_json_lines_and_plain_text_both_read(tmp_path: Path) -> None:
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_bytes(  # as a Windows editor saves it: a byte-order mark, CRLF line ends
        b"\xef\xbb\xbf"
        b'{"id": "a", "query": "Orders of CUST-00042?", "deadline": 12, "grant": "billing:read"}\r\n'
        b"# a comment\r\n\r\n"
        b'{"id": "b", "query": "Tickets for CUST-00007"}\r\n'
    )
    assert read_questions(jsonl) == [
        Question(id="a", query="Orders of CUST-00042?", deadline=12, grant=("billing:read",)),
        Question(id="b", query="Tickets for CUST-00007"),
    ]
    text = tmp_path / "q.txt"
    text.write_text("Orders of CUST-00042?\n\nTickets for CUST-00007\n")
    assert [(q.id, q.query) for q in read_questions(text)] == [
        ("line-1", "Orders of CUST-00042?"),
        ("line-3", "Tickets for CUST-00007"),
    ]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"id": "a"}', "q.jsonl:2: the field 'query' is missing"),
        ('{"id": "../../etc/passwd", "query": "x"}', "is not a plain name"),
        ('{"id": "a", "query": "x", "when": 1}', "unknown field 'when'"),
        ('{"id": "a", "query": "x", "deadline": -1}', "deadline"),
        ('{"id": "a", "query": "x"', "not a JSON object"),
        ('["a", "x"]', "expected a JSON object"),
        ('{"id": "first", "query": "again"}', "is on line 1 too"),
    ],
)
def test_a_bad_line_is_named_with_the_field_and_an_example(tmp_path: Path, line: str, said: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "first", "query": "Orders of CUST-00042?"}\n' + line + "\n")
    with pytest.raises(QuestionsError) as raised:
        read_questions(path)
    assert said in str(raised.value)
    assert "Traceback" not in str(raised.value)
    if "line 1 too" not in said:
        assert '"query": "Orders of CUST-00042?"' in str(raised.value)  # the example


@given(st.text(min_size=1, max_size=120))
def test_an_id_is_a_plain_file_name_or_refused(candidate: str) -> None:
    try:
        question = Question(id=candidate, query="x")
    except ValueError:
        return
    assert "/" not in question.id and not question.id.startswith(".") and "\x00" not in question.id


EVERY_URL = [f"--url={source}=http://127.0.0.1:1/mcp" for source in SOURCES]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--engine", "spark"), "--engine takes local or ray; got 'spark'"),
        (("--url", "orders=127.0.0.1:8102"), "--url takes SOURCE=URL, e.g. orders=http://127.0.0.1:8102/mcp"),
        (
            ("--url", "orders=http://127.0.0.1:1/mcp"),
            "--url names no URL for customers, billing, tickets, kb",
        ),
        (
            (*EVERY_URL, "--faults", "orders:transient=0.5"),
            "--faults are set through a fleet's chaos control, not on sources given by --url",
        ),
        (("--concurrency", "0"), "--concurrency"),
        (("--url", "foo=http://127.0.0.1:1/mcp"), "unknown source 'foo'"),
    ],
)
def test_bad_options_are_one_line_each(
    settings: SourceSettings, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    questions = write_questions(tmp_path, QUESTIONS[:1])
    done = in_process(settings, str(questions), "--out", str(tmp_path / "out"), *args)
    assert done.exit_code == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "reports").exists() or not list((tmp_path / "out" / "reports").iterdir())


def test_an_out_that_cannot_be_a_folder_is_named(settings: SourceSettings, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file of the user's")
    done = in_process(
        settings, str(write_questions(tmp_path, QUESTIONS[:1])), "--out", str(tmp_path / "taken")
    )
    assert done.exit_code == 2 and "cannot be the batch's folder (File exists)" in done.stderr, done.stderr
    assert (tmp_path / "taken").read_text() == "a file of the user's"


def _link_out(out: Path, elsewhere: Path) -> None:  # --out itself: a link to a folder of reports
    (elsewhere / "reports").mkdir()
    (elsewhere / "reports" / "q001.json").write_text(FORGED)
    out.symlink_to(elsewhere, target_is_directory=True)


def _link_reports(out: Path, elsewhere: Path) -> None:  # its reports folder: a link to forged ones
    (elsewhere / "q001.json").write_text(FORGED)
    out.mkdir()
    (out / "reports").symlink_to(elsewhere, target_is_directory=True)


def _link_a_report(out: Path, elsewhere: Path) -> None:  # one report: a link to a forged one
    (elsewhere / "forged.json").write_text(FORGED)
    (out / "reports").mkdir(parents=True)
    (out / "reports" / "q001.json").symlink_to(elsewhere / "forged.json")


def _link_the_summary(out: Path, elsewhere: Path) -> None:  # summary.json: a link to a file of the user's
    (elsewhere / "notes.txt").write_text("a file of the user's")
    (out / "reports").mkdir(parents=True)
    (out / "reports" / "q001.json").write_text(FORGED)
    (out / "summary.json").symlink_to(elsewhere / "notes.txt")


def _link_the_traces(out: Path, elsewhere: Path) -> None:  # the traces folder: a link to another folder
    (out / "reports").mkdir(parents=True)
    (out / "reports" / "q001.json").write_text(FORGED)
    (out / "traces").symlink_to(elsewhere, target_is_directory=True)


def _files_in(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


FORGED = json.dumps({"status": "complete", "query": "forged", "gaps": []})


@pytest.mark.parametrize(
    ("plant", "said"),
    [
        (_link_out, "is a symbolic link"),
        (_link_reports, "holds a symbolic link"),
        (_link_a_report, "holds a symbolic link"),
        (_link_the_summary, "holds a symbolic link"),
        (_link_the_traces, "holds a symbolic link"),
    ],
)
def test_an_out_that_is_or_holds_a_symbolic_link_is_refused_and_nothing_written_through_it(
    settings: SourceSettings, tmp_path: Path, plant: Any, said: str
) -> None:
    """A link planted in --out (or --out a link) would have the batch write its reports and traces
    somewhere else, or read a forged report as answered: refused in one line, before anything is written."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant(out, elsewhere)
    before = _files_in(elsewhere)
    done = in_process(settings, str(write_questions(tmp_path, QUESTIONS[:1])), "--out", str(out))
    assert done.exit_code == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: --out {out} {said}") and "Traceback" not in done.stderr, line
    assert _files_in(elsewhere) == before  # nothing written there
    assert not (out / "summary.json").exists() or (out / "summary.json").is_symlink()


def test_a_missing_questions_file_is_named(settings: SourceSettings, tmp_path: Path) -> None:
    done = in_process(settings, str(tmp_path / "nowhere.jsonl"), "--out", str(tmp_path / "out"))
    assert done.exit_code == 2 and "cannot read the questions file" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- the guard's rules ---------------------------------------------------------------------------


# The retry budget's properties (a share of the last window's first attempts plus a reserve) are in
# tests/test_retry_budget.py.


@given(st.lists(st.integers(min_value=0, max_value=150), max_size=60))
def test_the_token_pool_never_spends_past_its_total(uses: list[int]) -> None:
    pool = TokenPool(total=1000, per_question=150)
    for used in uses:
        if pool.reserve():
            pool.settle(used)  # a question never spends more than its own budget (TokenBudget)
        assert pool.used + pool.reserved <= pool.total


def test_a_question_waits_for_tokens_that_questions_in_flight_may_give_back() -> None:
    pool = TokenPool(total=250, per_question=100)
    taken: list[bool] = []

    async def main() -> None:
        with anyio.fail_after(5):
            assert await pool.take() and await pool.take()  # 200 reserved: a third cannot fit yet
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: _record(pool, taken))
                await anyio.lowlevel.checkpoint()
                assert taken == []  # waiting, not refused: two questions are still in flight
                pool.settle(20)  # one ends having used 20: 120 held, 100 more fit
            assert taken == [True]
            pool.settle(100)
            pool.settle(100)  # 220 used, none in flight: the rest cannot hold a whole question
            assert await pool.take() is False

    anyio.run(main)


async def _record(pool: TokenPool, taken: list[bool]) -> None:
    taken.append(await pool.take())


def test_a_bulkhead_caps_calls_to_one_source_at_once() -> None:
    bulkheads = Bulkheads(limit=2, limits={"kb": 1})
    peak: dict[str, int] = {"orders": 0, "kb": 0}
    now: dict[str, int] = {"orders": 0, "kb": 0}

    async def call(source: str) -> None:
        async with bulkheads.slot(source):
            now[source] += 1
            peak[source] = max(peak[source], now[source])
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            now[source] -= 1

    async def main() -> None:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(call, "orders")
                    group.start_soon(call, "kb")

    anyio.run(main)
    assert peak == {"orders": 2, "kb": 1}


# --- real batches ---------------------------------------------------------------------------------


def test_a_batch_writes_a_report_each_as_ask_would_and_a_trace_each(
    settings: SourceSettings, tmp_path: Path, no_fleet_left: None
) -> None:
    questions = write_questions(tmp_path, [*QUESTIONS, "what is the weather"])
    out = tmp_path / "out"
    done = run_batch_command(settings, str(questions), "--out", str(out), "--concurrency", "4")
    assert done.returncode == 3, done.stderr  # one question cannot be researched: not all complete
    reports = sorted((out / "reports").glob("*.json"))
    assert [path.stem for path in reports] == [f"q{n:03d}" for n in range(1, len(QUESTIONS) + 1)]
    for path in reports:
        ResearchReport.model_validate_json(path.read_text())  # the model of `ask --json`
    failed = json.loads((out / "failed" / "q007.json").read_text())
    assert failed["query"] == "what is the weather" and "names nothing to research" in failed["error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == 7 and summary["failed"] == 1
    assert summary["answered"] + summary["partial"] == len(QUESTIONS)
    assert summary["invariant_violations"] == 0
    assert "questions per second" in done.stdout and "retries / first attempts" in done.stdout
    traced = {json.loads(p.read_text())["trace_id"] for p in reports}
    spans = [
        json.loads(line) for f in (out / "traces").glob("*.jsonl") for line in f.read_text().splitlines()
    ]
    by_trace: dict[str, set[str]] = {}
    for span in spans:
        trace_id = span["context"]["trace_id"].removeprefix("0x")
        by_trace.setdefault(trace_id, set()).add(span["resource"]["attributes"]["service.name"])
    for trace_id in traced:  # one trace per question, from the coordinator into the sources
        assert "research-coordinator" in by_trace[trace_id] and len(by_trace[trace_id]) > 1
    assert Fleet(settings).members() == {}  # the fleet it started is stopped

    asked = subprocess.run(  # the same report as `research ask --json`, the trace id aside
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", QUESTIONS[1], "--json"],
        env={**os.environ, **settings.child_environment()}, cwd=PROJECT_ROOT, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert asked.returncode in (0, 3), asked.stderr
    by_ask, by_batch = json.loads(asked.stdout), json.loads(reports[1].read_text())
    assert by_ask.pop("trace_id") != by_batch.pop("trace_id")
    assert by_batch == by_ask and len(by_batch["tasks"]) == 3  # customers, orders, tickets


def test_a_killed_batch_keeps_every_finished_report_and_a_rerun_finishes(
    settings: SourceSettings, tmp_path: Path, no_fleet_left: None
) -> None:
    # q001 cannot be researched: failed at once, and tried again by the rerun like every unanswered one.
    queries = ["what is the weather", *(QUESTIONS[number % 3] for number in range(30))]
    questions = write_questions(tmp_path, queries)
    out = tmp_path / "out"
    interrupted(batch_command(settings, str(questions), "--out", str(out), *SLOW), out, 3, signal.SIGKILL)
    assert (out / "failed" / "q001.json").exists()
    kept = sorted((out / "reports").glob("*.json"))
    assert 3 <= len(kept) < 30
    for path in kept:  # whole: each one a full report, none cut short
        ResearchReport.model_validate_json(path.read_text())
    assert not [
        p for p in (out / "reports").iterdir() if not p.name.endswith(".json") and not p.name.startswith(".")
    ]
    first_run = {path.name: path.read_bytes() for path in kept}

    again = run_batch_command(settings, str(questions), "--out", str(out), "--resume")
    assert again.returncode == 3, again.stderr  # the question nobody can research
    reports = {path.name: path.read_bytes() for path in (out / "reports").glob("*.json")}
    assert len(reports) == 30
    assert all(reports[name] == content for name, content in first_run.items())  # nothing asked twice
    summary = json.loads((out / "summary.json").read_text())
    assert summary["this_run"]["questions"] == 30 - len(kept) + 1  # the unanswered, the failed one too
    assert summary["failed"] == 1 and summary["invariant_violations"] == 0
    assert summary["this_run"]["workers"] >= 1

    answered = tmp_path / "answered.jsonl"  # the same questions less the one nobody can research
    answered.write_text("\n".join(questions.read_text().splitlines()[1:]) + "\n")
    third = run_batch_command(settings, str(answered), "--out", str(out), "--resume")
    assert third.returncode == 0, third.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["this_run"]["questions"] == 0 and summary["this_run"]["workers"] == 0  # none started
    assert "none asked: every question had its report" in " ".join(third.stdout.split())


def test_ctrl_c_keeps_every_finished_report_and_stops_the_fleet(
    settings: SourceSettings, tmp_path: Path, no_fleet_left: None
) -> None:
    questions = write_questions(tmp_path, [QUESTIONS[number % 3] for number in range(30)])
    out = tmp_path / "out"
    process = batch_command(settings, str(questions), "--out", str(out), *SLOW)
    err = interrupted(process, out, 2, signal.SIGINT)
    assert process.returncode == 130, err
    assert "interrupted: the finished reports are in" in err and "Traceback" not in err
    kept = list((out / "reports").glob("*.json"))
    for path in kept:
        ResearchReport.model_validate_json(path.read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["answered"] + summary["partial"] == len(kept) < 30
    assert Fleet(settings).members() == {}  # the fleet it started is stopped on the way out


def test_claude_mode_keeps_each_question_and_the_batch_within_their_token_budgets(
    settings: SourceSettings, tmp_path: Path, no_fleet_left: None
) -> None:
    api = FakeMessagesApi(Conversations())  # a real HTTP peer speaking the Messages API
    questions = write_questions(tmp_path, QUESTIONS)
    out = tmp_path / "out"
    claude = {
        "ANTHROPIC_API_KEY": "test-key", "ANTHROPIC_BASE_URL": api.base_url,
        "RESEARCH_CLAUDE_TOKEN_BUDGET": "6000",
    }  # fmt: skip
    try:
        process = batch_command(
            settings, str(questions), "--out", str(out), "--llm", "claude", "--total-tokens", "14000",
            environment=claude,
        )  # fmt: skip
        _, err = process.communicate(timeout=240)
        assert process.returncode == 3, err
        summary = json.loads((out / "summary.json").read_text())
        reports = [json.loads(path.read_text()) for path in (out / "reports").glob("*.json")]
        assert reports and summary["not_started"] == len(QUESTIONS) - len(reports) > 0
        assert sum(report["tokens"]["used"] for report in reports) <= 14000  # the batch's total
        assert all(report["tokens"]["used"] <= 6000 == report["tokens"]["limit"] for report in reports)
        assert all(report["planning"]["planner"] == "claude" for report in reports)
        assert summary["invariant_violations"] == 0

    finally:
        assert api.script_errors == []
        api.close()


SLOW = ("--faults", "customers:latency=150ms,seed=1", "--concurrency", "2")  # a batch that takes a while


def wait_for_reports(process: subprocess.Popen[str], out: Path, reports: int) -> None:
    """Until a running batch has written ``reports`` reports (bounded: two minutes)."""
    until = time.monotonic() + 120
    while len(list((out / "reports").glob("*.json"))) < reports:
        assert time.monotonic() < until, "the batch wrote too few reports in time"
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.05)  # polling a folder another process writes: bounded above


def interrupted(process: subprocess.Popen[str], out: Path, reports: int, how: signal.Signals) -> str:
    """Send ``how`` to a running batch once ``reports`` reports are written; its stderr once it ends."""
    try:
        wait_for_reports(process, out, reports)
        process.send_signal(how)
        return process.communicate(timeout=60)[1]
    finally:
        if process.poll() is None:
            process.kill()
