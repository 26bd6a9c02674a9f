"""Input is bounded where it enters: refused before it is read whole, in one line naming what to do.

Standard input, a questions file and a registry file are read no further than their limit; arguments
nested deeper than any tool needs are refused when parsed, and the trace's redaction walks any depth.
(The service's request body: ``test_service.py``; a source's answer: ``test_answer_limit.py``.)
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from coordinator.batch.questions import QuestionsError, read_questions
from coordinator.registry import Registry, RegistryError
from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT
from tests.test_cli import research
from traces.redact import for_trace, redact
from traces.stand_ins import pseudonymous

BOUND_S = 60.0  # every command below ends well within this, or the test fails rather than hangs
MAX_DEPTH = 64  # the levels a trace keeps (traces.redact), as the docs state them
QUESTIONS_FILE_BYTES = 16 * 2**20  # a questions file's bound (coordinator.batch.questions), as documented


def nested(depth: int) -> Any:
    value: Any = "CUST-00042"
    for level in range(depth):
        value = {"inner": value} if level % 2 else [value]
    return value


def _one_line_usage_error(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr[-2000:]
    assert all(fragment in lines[0] for fragment in fragments), lines[0]
    assert "Traceback" not in done.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("command", "depth"),
    [
        (("sources", "call", "customers", "customer_lookup"), 1000),
        (("task", "customers", "customer_lookup"), 500),
    ],
)
def test_arguments_nested_too_deep_are_one_line_naming_the_arguments(
    settings: SourceSettings, command: tuple[str, ...], depth: int
) -> None:
    arguments = '{"identifier": ' + "[" * depth + '"CUST-00042"' + "]" * depth + "}"  # json.dumps recurses
    _one_line_usage_error(
        research(settings, *command, arguments), "arguments nest deeper than 64 levels", "flatten"
    )


@pytest.mark.parametrize("walk", [redact, for_trace, lambda value: pseudonymous(value, keep=())])
def test_the_trace_walks_any_depth_keeping_a_placeholder_below_its_bound(walk: Any) -> None:
    deep = {"query": "jane.doe@example.com", "arguments": nested(20_000)}
    walked = walk(deep)
    json.dumps(walked)  # what a span holds encodes, too
    level, depth = walked["arguments"], 1
    while isinstance(level, dict | list):
        level, depth = (level["inner"] if isinstance(level, dict) else level[0]), depth + 1
    assert (
        level == f"[nested deeper than {MAX_DEPTH} levels]" and depth == MAX_DEPTH
    )  # levels kept, the top one too


@pytest.mark.subprocess
def test_stdin_over_a_query_s_bytes_is_refused_without_waiting_for_its_end(settings: SourceSettings) -> None:
    """Standard input that goes on (a pipe still open after 1 MB) is refused once it passes a query's
    most bytes: the command does not wait to read it whole."""
    environment = {**os.environ, **settings.child_environment(), "COLUMNS": "200"}
    asking = subprocess.Popen(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment, cwd=PROJECT_ROOT,
    )  # fmt: skip
    assert asking.stdin is not None

    def feed() -> None:
        try:
            asking.stdin.write(b"Refund please. " * 70_000)  # about 1 MB, and the pipe stays open
            asking.stdin.flush()
        except BrokenPipeError:
            pass  # the command refused it and left: what is expected

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        stderr = _stderr_within(asking)
    finally:
        asking.kill()
        asking.wait(timeout=BOUND_S)
        feeder.join(timeout=BOUND_S)
        for pipe in (asking.stdin, asking.stdout, asking.stderr):
            with contextlib.suppress(BrokenPipeError):
                pipe.close()  # type: ignore[union-attr]  # all three are pipes (Popen above)
    done = subprocess.CompletedProcess(asking.args, asking.returncode, "", stderr)
    _one_line_usage_error(done, "the query on stdin is longer than 256,000 bytes", "64,000 characters")


def _stderr_within(process: subprocess.Popen[bytes]) -> str:
    """The process's standard error once it has exited by itself (stdin left open); fails past the bound."""
    try:
        process.wait(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail("the command was still reading its standard input: it read to the end, not to its bound")
    assert process.stderr is not None
    return process.stderr.read().decode()


def test_a_questions_file_over_its_bound_is_one_line_saying_to_split_it(tmp_path: Path) -> None:
    line = json.dumps({"id": "case-1", "query": "Orders of CUST-00042?"}) + "\n"
    questions = tmp_path / "questions.jsonl"
    with questions.open("w") as file:
        for number in range(QUESTIONS_FILE_BYTES // len(line) + 2):
            file.write(line.replace("case-1", f"case-{number}"))
    with pytest.raises(QuestionsError, match=r"larger than 16 MB; split it into batches") as refused:
        read_questions(questions)
    assert "\n" not in str(refused.value)


def test_a_registry_file_over_its_bound_is_one_line(tmp_path: Path) -> None:
    registry = tmp_path / "research.toml"
    registry.write_text("# a comment\n" * 100_000)
    with pytest.raises(RegistryError, match=r"research.toml: larger than 1024 KB; a registry lists sources"):
        Registry.load(registry)
