"""The `research sources` commands, run as a user runs them: a real process spawning real sources."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sources.catalogue import input_schemas
from sources.settings import SourceSettings
from sources.world import world_path
from tests.conftest import PROJECT_ROOT, RESEARCH_INTERRUPTIBLE
from tests.fresh_process import in_a_fresh_process

pytestmark = pytest.mark.subprocess


def research(
    settings: SourceSettings, *args: str, cwd: Path = PROJECT_ROOT, columns: int = 200
) -> subprocess.CompletedProcess[str]:
    """Run `research ARGS...` to its end, as a user does (from ``cwd``: its ./research.toml is read),
    in a terminal ``columns`` wide."""
    environment = {**os.environ, **settings.child_environment(), "COLUMNS": str(columns)}
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *args],
        env=environment, cwd=cwd, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def research_process(settings: SourceSettings, *args: str) -> subprocess.Popen[str]:
    """Start `research ARGS...` and return at once: for a test that interrupts it."""
    environment = {**os.environ, **settings.child_environment(), "COLUMNS": "200"}
    return subprocess.Popen(
        [*RESEARCH_INTERRUPTIBLE, *args],
        env=environment, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_list_shows_the_five_sources_and_their_tools(settings: SourceSettings) -> None:
    listed = research(settings, "sources", "list", "--live")
    assert listed.returncode == 0, listed.stderr
    for tool in ["customer_lookup", "search_orders", "issue_refund", "search_tickets", "related_policies"]:
        assert tool in listed.stdout


def test_call_prints_the_contract_and_exits_by_outcome(settings: SourceSettings) -> None:
    found = research(
        settings, "sources", "call", "customers", "customer_lookup", '{"identifier": "CUST-00042"}'
    )
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["email"] == "jane.doe@example.com"

    refused = research(
        settings, "sources", "call", "billing", "refund_eligibility",
        '{"order_id": "ORD-10023", "amount": 750}', "--scope", "billing:read",
    )  # fmt: skip
    assert refused.returncode == 1
    payload = json.loads(refused.stdout)
    assert payload["isError"] is True and payload["errorCategory"] == "business"
    assert payload["partial_results"][0]["id"] == "ORD-10023"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["sources", "call", "customers", "customer_lookup", "{not json"], "must be a JSON object"),
        (["sources", "call", "customers", "customer_lookup", "[1]"], "must be a JSON object"),
        (["sources", "call", "crm", "customer_lookup"], "unknown source 'crm'"),
        (["sources", "call", "kb", "nope"], "kb has no tool 'nope'; its tools are"),
        (
            ["sources", "call", "kb", "search_policies", "{}", "--url", "htp:/bad"],
            "--url must be an http(s) URL",
        ),
        (
            ["sources", "call", "kb", "search_policies", "{}", "--url", "http://[::1"],
            "--url must be an http(s) URL",
        ),
        (["ask", "refund £45 on ORD-10031", "--bogus"], "No such option: --bogus"),
        (["ask", "refund £45 on ORD-10031", "--llm", "gpt"], "'gpt' is not one of 'auto', 'claude', 'none'"),
        (["ask"], "Missing argument 'query'"),
        (["chaos", "kill", "nope"], "unknown fleet member 'nope'"),
        (["task", "orders", "search_orders", "{}", "--faults", "kb:hang=1"], "this task calls orders"),
        (["task", "orders", "search_orders", "{}", "--faults", "hang=1"], "--faults takes SOURCE:SETTINGS"),
    ],
)
def test_usage_errors_say_what_is_wrong(settings: SourceSettings, args: list[str], fragment: str) -> None:
    result = research(settings, *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["sources", "check", "notes"],
        ["sources", "call", "notes", "search", "{}"],
        ["task", "notes", "search", "{}"],
    ],
)
def test_a_source_of_an_unapproved_registry_is_one_line_saying_why(
    settings: SourceSettings, tmp_path: Path, args: list[str]
) -> None:
    """A research.toml nobody here approved (it came with a clone, say) runs none of its commands: a
    command naming one of its sources says so in one line, exit status 2, never a KeyError's traceback."""
    ran = tmp_path / "ran"
    (tmp_path / "research.toml").write_text(
        f'[[source]]\nname = "notes"\ncommand = ["touch", "{ran}"]\n', encoding="utf-8"
    )
    fresh = dataclasses.replace(settings, data_dir=tmp_path / "data")  # nothing approved there
    done = research(fresh, *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "source 'notes' is not in effect" in line, line
    assert "research.toml is not approved here" in line and "`research sources trust`" in line, line
    assert "Traceback" not in done.stderr and done.stdout == "" and not ran.exists()


def test_help_lists_the_choices_and_no_type_of_a_flag(settings: SourceSettings) -> None:
    shown = research(settings, "ask", "--help")
    assert shown.returncode == 0 and "<bool>" not in shown.stdout
    assert "<stdio|http>" in shown.stdout and "<auto|claude|none>" in shown.stdout
    assert all(len(line) <= 200 for line in shown.stdout.splitlines())


# A type as typer labels it, not a list of choices ("<stdio|http>" lists what to type): "<str>",
# "<list[str]>", "<float range>", "<JsonObject>", "<path>".
TYPE_LABEL = re.compile(r"<(?![a-z-]+(?:\|[a-z-]+)+>)[^>\s]*(?: range)?>")


def test_ask_help_names_each_value_in_words_at_80_columns(settings: SourceSettings) -> None:
    shown = research(settings, "ask", "--help", columns=80)
    assert shown.returncode == 0, shown.stderr
    assert re.match(r"Usage: \S+ ask \[OPTIONS\] QUERY\n", shown.stdout), shown.stdout  # \S+: the program
    assert "\n  QUERY  The question" in shown.stdout
    for option in ("--grant SCOPE", "--faults SOURCE:SETTINGS", "--deadline SECONDS", "--seed N"):
        assert f"  {option}  " in shown.stdout, option
    assert TYPE_LABEL.findall(shown.stdout) == [] and "{query}" not in shown.stdout
    assert all(len(line) <= 80 for line in shown.stdout.splitlines())


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        found += _commands(command, (*path, name)) if hasattr(command, "commands") else [(*path, name)]
    return found


def test_every_command_s_help_names_each_value_in_words() -> None:
    from typer.main import get_command
    from typer.testing import CliRunner

    from coordinator.cli import app

    commands = _commands(get_command(app))
    assert ("traces", "show") in commands and len(commands) > 20
    for command in commands:
        shown = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
        assert shown.exit_code == 0, (command, shown.output)
        usage = shown.output.splitlines()[0]
        assert "{" not in usage and "<" not in usage, usage  # QUERY, [TRACE_ID]: never {query}
        assert TYPE_LABEL.findall(shown.output) == [], (command, shown.output)


def test_an_unreachable_url_is_one_line(settings: SourceSettings) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = research(
        settings, "sources", "call", "kb", "search_policies", "{}", "--url", f"http://127.0.0.1:{port}/mcp"
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: could not call kb at http://127.0.0.1:{port}/mcp: ")


def test_a_source_warming_up_is_called_again_when_it_said(settings: SourceSettings, tmp_path: Path) -> None:
    """kb warms its index on its first start on a world: `sources call` waits the retryAfterMs once."""
    world = world_path(settings.data_dir, settings.seed)
    shutil.copytree(
        world, world_path(tmp_path, settings.seed), ignore=shutil.ignore_patterns("kb-index.built")
    )
    fresh = dataclasses.replace(settings, data_dir=tmp_path, kb_warmup_ms=700)
    done = research(fresh, "sources", "call", "kb", "search_policies", '{"query": "refund"}')
    assert done.returncode == 0, done.stderr
    assert "kb is warming up; calling again in" in done.stderr
    assert json.loads(done.stdout)["resultCount"] > 0


def test_ask_reads_a_long_query_from_stdin(settings: SourceSettings) -> None:
    """A pasted customer email, far longer than a command line likes, through `research ask -`."""
    filler = "The weather has been lovely and the parcel took a while to come. " * 450  # ~30 KB
    email = f"Dear support,\n{filler}\nCould you refund £45 on ORD-10031? Thanks, Jane\n"
    environment = {**os.environ, **settings.child_environment(), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", "ask", "-", "--json"],
        input=email, env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr
    assert done.stdout.startswith("{"), (done.returncode, done.stdout[:500], done.stderr[-2000:])
    report = json.loads(done.stdout)
    assert len(report["query"]) > 25_000
    refund = next(task for task in report["tasks"] if task["tool"] == "refund_eligibility")
    assert refund["state"] == "ok" and refund["arguments"] == {"order_id": "ORD-10031", "amount": 45.0}


def test_ask_over_http_without_a_fleet_names_the_way_out(settings: SourceSettings, tmp_path: Path) -> None:
    nowhere = dataclasses.replace(settings, data_dir=tmp_path)
    done = research(nowhere, "ask", "refund £45 on ORD-10031", "--transport", "http")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "no fleet is running" in line and "research sources up" in line


def test_ask_with_a_grant_answers_what_the_permission_gap_asked_for(settings: SourceSettings) -> None:
    query = "list the invoices of CUST-00042"
    refused = research(settings, "ask", query)
    assert refused.returncode == 3 and "request access: ask again with --grant billing:read" in refused.stdout
    granted = research(settings, "ask", query, "--grant", "billing:read", "--json")
    assert granted.returncode == 0, granted.stderr
    assert json.loads(granted.stdout)["status"] == "complete"


STORY = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"


def test_ask_the_story_end_to_end(settings: SourceSettings) -> None:
    """The real CLI, five real stdio sources, a seeded transient fault on tickets; the JSON field by field."""
    done = research(
        settings, "ask", STORY, "--json", "--faults", "tickets:transient=0.5,seed=13", "--seed", "1"
    )
    assert done.returncode == 3, done.stderr  # partial: the refund needs a manager
    report = json.loads(done.stdout)
    assert set(report) >= {
        "query",
        "trace_id",
        "status",
        "answer",
        "findings",
        "tasks",
        "gaps",
        "escalations",
    }
    assert report["query"] == STORY and report["status"] == "partial"
    assert len(report["trace_id"]) == 32 and int(report["trace_id"], 16) != 0
    tasks = {task["id"]: task for task in report["tasks"]}
    assert {task_id: task["state"] for task_id, task in tasks.items()} == {
        "customer": "ok", "orders": "ok", "policies": "ok", "refund": "escalated", "tickets": "ok",
    }  # fmt: skip
    assert {task["source"] for task in report["tasks"]} == {"customers", "orders", "billing", "tickets", "kb"}
    tickets = tasks["tickets"]
    assert tickets["attempts"] == 2 and [d["action"] for d in tickets["decisions"]] == ["retry"]
    assert set(tickets["decisions"][0]) == {"action", "category", "attempt", "backoff_ms", "reason"}
    assert tickets["decisions"][0]["category"] == "transient"
    for finding in report["findings"]:
        assert set(finding) == {"source", "tool", "record_id", "text"}
    assert {"source": "tickets", "tool": "search_tickets", "record_id": "TCK-20042"}.items() <= next(
        f for f in report["findings"] if f["record_id"] == "TCK-20042"
    ).items()
    (gap,) = report["gaps"]
    assert {key: gap[key] for key in ("task", "source", "state", "errorCategory", "next_step")} == {
        "task": "refund", "source": "billing", "state": "escalated", "errorCategory": "business",
        "next_step": "escalate to a manager",
    }  # fmt: skip
    assert gap["attempted_query"] == {
        "tool": "refund_eligibility",
        "arguments": {"order_id": "ORD-10023", "amount": 750.0},
    }
    assert gap["partial_results"][0]["eligible"] is False
    (escalation,) = report["escalations"]
    assert set(escalation) == {
        "isError", "errorCategory", "isRetryable", "message", "attempted_query", "partial_results",
        "source", "attempts", "decisions",
    }  # fmt: skip
    assert (
        escalation["isError"] is True
        and escalation["isRetryable"] is False
        and escalation["source"] == "billing"
    )


def test_ask_without_json_prints_the_report(settings: SourceSettings) -> None:
    done = research(settings, "ask", "Who is CUST-00077? Any open tickets?")
    assert done.returncode == 0, done.stderr
    assert "COMPLETE" in done.stdout and "[tickets:search_tickets:none]" in done.stdout


def test_ask_at_80_columns_fits_them_and_keeps_each_task_s_tool(settings: SourceSettings) -> None:
    done = research(settings, "ask", STORY, columns=80)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    (header,) = [at for at, line in enumerate(lines) if line.split()[:1] == ["task"]]
    assert lines[header].split() == ["task", "tool", "state", "last", "step"]  # the source went, not the tool
    rows = {line.split()[0]: line.split()[1:] for line in lines[header + 1 :] if line.strip()}
    assert {task: words[0] for task, words in rows.items()} == {
        "customer": "customer_lookup", "orders": "search_orders", "policies": "search_policies",
        "refund": "refund_eligibility", "tickets": "search_tickets",
    }  # fmt: skip
    assert rows["refund"][1:] == ["escalated", "escalated:", "business", "(2", "attempts)"]  # one line each
    too_wide = [line for line in (done.stdout + done.stderr).splitlines() if len(line) > 80]
    assert too_wide == [], too_wide


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["ask", ""], "the query is empty"),
        (["ask", "x" * 100_000], "keep it under 64,000"),
        (["ask", "Orders of CUST-00042\x07"], "control character"),
        (["ask", "hello there"], "names nothing to research"),
        (["ask", STORY, "--transport", "carrier-pigeon"], "'carrier-pigeon' is not one of 'stdio', 'http'"),
        (["ask", STORY, "--deadline", "0"], "--deadline must be a positive number"),
        (["ask", STORY, "--deadline", "-3"], "--deadline must be a positive number"),
        (["ask", STORY, "--faults", "crm:transient=1"], "--faults takes SOURCE:SETTINGS"),
        (["ask", STORY, "--faults", "kb:transient=7"], "--faults kb:"),
    ],
)
def test_ask_refuses_bad_input_in_one_line(settings: SourceSettings, args: list[str], fragment: str) -> None:
    done = research(settings, *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_traces_show_latest_renders_what_ask_wrote(settings: SourceSettings, tmp_path: Path) -> None:
    traced = dataclasses.replace(settings, traces_dir=tmp_path / "traces")
    done = research(traced, "ask", STORY, "--faults", "tickets:transient=0.5,seed=13", "--seed", "1")
    assert done.returncode == 3, done.stderr
    shown = research(traced, "traces", "show", "latest")
    assert shown.returncode == 0, shown.stderr
    for service in ("coordinator", "customers", "orders", "billing", "tickets", "kb"):
        assert f"{service} " in shown.stdout
    assert "◆ retry" in shown.stdout and "◆ elevate" in shown.stdout and "◆ escalate" in shown.stdout
    assert "subagent billing" in shown.stdout and "ERROR business" in shown.stdout
    listed = research(traced, "traces", "list")
    assert listed.returncode == 0 and "partial" in listed.stdout
    as_json = research(traced, "traces", "list", "--json", "--kind", "query")
    assert as_json.returncode == 0, as_json.stderr
    (summary,) = json.loads(as_json.stdout)
    assert summary["kind"] == "query" and summary["status"] == "partial" and len(summary["trace_id"]) == 32
    missing = research(traced, "traces", "show", "0" * 32)
    assert missing.returncode == 2 and missing.stderr.startswith("error: no trace")


def test_ask_with_per_query_chaos(settings: SourceSettings) -> None:
    query = "Investigate CUST-00042: recent orders, open tickets, and whether a £45 refund on ORD-10031 is allowed"
    # The deadline counts from the command's start: the five sources starting at once, then customers
    # killed and respawned, take several seconds on a busy two-core machine (about 2 s here, idle); the
    # hung tickets end it, so the test lasts the whole deadline.
    done = research(
        settings, "ask", query, "--json", "--chaos", "kill:customers@0.2s,hang:tickets", "--deadline", "10"
    )
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    states = {task["source"]: task["state"] for task in report["tasks"]}
    assert states["tickets"] in ("deadline", "escalated") and states["customers"] == "ok"
    (gap,) = report["gaps"]
    assert gap["source"] == "tickets" and gap["next_step"] == "retry later"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("explode:kb", "KIND:SOURCE"),
        ("hang:kb@1s", "only kill takes a time"),
        ("flaky:kb=lots", "not a number"),
    ],
)
def test_ask_refuses_a_bad_chaos_spec(settings: SourceSettings, spec: str, fragment: str) -> None:
    done = research(settings, "ask", STORY, "--chaos", spec)
    assert done.returncode == 2 and fragment in done.stderr and "Traceback" not in done.stderr


def test_plan_shows_the_plan_without_running_it(settings: SourceSettings) -> None:
    shown = research(settings, "plan", "refund 45 quid on ORD-10031? and what did cust 42 buy", "--json")
    assert shown.returncode == 0, shown.stderr
    plan = json.loads(shown.stdout)
    calls = {task["tool"]: task for task in plan["tasks"]}
    assert calls["refund_eligibility"]["arguments"] == {"order_id": "ORD-10031", "amount": 45.0}
    assert calls["refund_eligibility"]["depends_on"] == [] and calls["refund_eligibility"]["why"]
    assert calls["search_orders"]["arguments"] == {"customer_id": "CUST-00042"}
    assert plan["unplanned"] == []

    partly = research(settings, "plan", "refund on ORD-10031 and tickets since last month")
    assert partly.returncode == 3, partly.stderr
    assert "not researched: a refund on ORD-10031" in partly.stdout and "say how much" in partly.stdout


# What a terminal would act on or hide rather than show: bidi overrides and isolates, the line and
# paragraph separators, zero-width and tag characters, a carriage return; each as it is printed.
UNSHOWN = {
    "\u202e": "\\u202e", "\u2066": "\\u2066", "\u2028": "\\u2028", "\u2029": "\\u2029",
    "\u200b": "\\u200b", "\ufeff": "\\ufeff", "\U000e0041": "\\U000e0041", "\r": "\\u000d",
}  # fmt: skip


def unshown_in(text: str) -> list[str]:
    """The control, format and separator characters of ``text`` (a new line and a tab aside)."""
    import unicodedata

    return [
        char for char in text if unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") and char not in "\n\t"
    ]


@pytest.mark.parametrize("char", list(UNSHOWN))
def test_plan_shows_a_control_or_bidi_character_of_the_query_escaped(
    settings: SourceSettings, char: str
) -> None:
    query = f"Orders of CUST-00042{char}tickets and evil"
    shown = research(settings, "plan", query, "--explain")
    assert shown.returncode in (0, 3), shown.stderr
    assert unshown_in(shown.stdout) == [] and unshown_in(shown.stderr) == []
    assert UNSHOWN[char] in shown.stdout, shown.stdout
    as_json = research(settings, "plan", query, "--json")  # data for scripts: the query as it was given
    assert as_json.returncode in (0, 3), as_json.stderr
    assert any(char in span["text"] for span in json.loads(as_json.stdout)["spans"])


def test_ask_shows_a_bidi_override_in_the_query_escaped(settings: SourceSettings) -> None:
    done = research(settings, "ask", "Orders of CUST-00042? \u202eredro\u2028PS")
    assert done.returncode in (0, 3), done.stderr
    assert unshown_in(done.stdout) == [] and unshown_in(done.stderr) == []
    assert "CUST-00042? \\u202eredro\\u2028PS" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("hello, how are you?", "names nothing to research"),
        ("€45??", "the amount '€45', but it is not an amount in pounds: billing works in GBP only"),
        ("refund £45", "no order was named"),
    ],
)
def test_plan_refuses_in_one_line_what_it_cannot_research(
    settings: SourceSettings, query: str, fragment: str
) -> None:
    refused = research(settings, "plan", query)
    assert refused.returncode == 2 and fragment in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr


FORWARDED = "---------- Forwarded message ---------\nFrom: jane.doe@example.com\nWhat are my recent orders?"


@pytest.mark.parametrize(
    ("command", "stdin"),
    [("ask", ", or on standard input with `research ask -`"), ("plan", "")],
)
def test_a_question_beginning_with_dashes_is_told_where_it_goes_and_is_read_there(
    settings: SourceSettings, command: str, stdin: str
) -> None:
    refused = research(settings, command, FORWARDED)
    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.strip().splitlines()  # one line: the pasted text is not echoed whole
    assert line == (
        "error: No such option: ---------- Forwarded message ---------...; a question that "
        f"begins with '-' goes after `--` (research {command} [OPTIONS] -- \"-...\"){stdin}"
    )
    # As the hint says: after `--`, and for `ask` on standard input.
    options = ["--json", "--llm", "none"] if command == "ask" else ["--json"]
    environment = {**os.environ, **settings.child_environment()}
    for args, given in [([*options, "--", FORWARDED], None), ([*options, "-"], FORWARDED)][
        : 2 if stdin else 1
    ]:
        done = subprocess.run(
            [sys.executable, "-c", "from coordinator.cli import app; app()", command, *args],
            input=given, env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["query"] == FORWARDED


@pytest.mark.parametrize("command", ["plan", "ask"])
def test_another_currency_is_a_gap_quoting_the_amount_as_typed(
    settings: SourceSettings, command: str
) -> None:
    done = research(settings, command, "refund $450 on ORD-10031", "--json", columns=80)
    assert done.returncode == 3, done.stderr  # partial: researched, but for that amount
    output = json.loads(done.stdout)
    unplanned = output["unplanned"]
    assert {
        "what": "the amount '$450'",
        "why": "it is not an amount in pounds: billing works in GBP only",
        "next_step": "give the amount in pounds, e.g. £45 or 45 GBP",
    } in unplanned


def test_a_pasted_email_with_an_amount_in_euros_is_researched_and_the_amount_named_a_gap(
    settings: SourceSettings,
) -> None:
    query = (
        "Investigate jane.doe@example.com: recent orders. Her email: I paid 129 Euro for the kettle on "
        "ORD-10023 and it came broken."
    )
    done = research(settings, "ask", query, "--llm", "none", columns=200)
    assert done.returncode == 3, done.stderr
    assert "GAP not researched: the amount '129 Euro': it is not an amount in pounds" in done.stdout
    assert "jane.doe@example.com" in done.stdout and "Traceback" not in done.stderr


def test_claude_mode_without_a_key_says_so_and_the_report_says_the_run_was_deterministic(
    settings: SourceSettings,
) -> None:
    assert "ANTHROPIC_API_KEY" not in os.environ  # the autouse guard's doing
    # A question of eligibility: complete without a write (a refund asked for would wait for approval).
    done = research(settings, "ask", "is a £45 refund on ORD-10031 allowed?", "--llm", "claude", columns=80)
    assert done.returncode == 0, done.stderr
    (said,) = [line for line in done.stderr.splitlines() if "ANTHROPIC_API_KEY" in line]
    assert said == done.stderr.splitlines()[0]  # before the run, in one line
    assert said.startswith(
        "warning: --llm claude, but no ANTHROPIC_API_KEY is set: this run is deterministic"
    )
    assert "export ANTHROPIC_API_KEY=" in said
    assert "Claude: 0 of" not in done.stdout and "tokens" not in done.stdout
    assert "note: a deterministic run: --llm claude, but no ANTHROPIC_API_KEY is set" in " ".join(
        done.stdout.split()
    )
    as_json = research(
        settings, "ask", "is a £45 refund on ORD-10031 allowed?", "--llm", "claude", "--json", columns=80
    )
    report = json.loads(as_json.stdout)
    assert (
        report["planning"]["planner"] == "deterministic" and report["synthesis"]["writer"] == "deterministic"
    )
    assert report["tokens"] is None and all(task["model"] is None for task in report["tasks"])
    assert any(note.startswith("a deterministic run: --llm claude") for note in report["notes"])
    planned = research(settings, "plan", "refund £45 on ORD-10031", "--llm", "claude", columns=80)
    assert planned.returncode == 0 and planned.stderr.splitlines() == [said], planned.stderr


def test_ask_a_refund_in_everyday_words_is_checked_and_complete(settings: SourceSettings) -> None:
    done = research(settings, "ask", "refund 45 quid on ORD-10031?", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "complete" and report["unplanned"] == []
    refund = next(task for task in report["tasks"] if task["tool"] == "refund_eligibility")
    assert refund["state"] == "ok" and refund["arguments"] == {"order_id": "ORD-10031", "amount": 45.0}


def test_ask_an_ambiguous_name_lists_the_candidates_and_asks_to_fix_the_input(
    settings: SourceSettings,
) -> None:
    done = research(settings, "ask", "does jane have any open complaints?", "--json")
    assert done.returncode == 3, done.stderr
    report = json.loads(done.stdout)
    (gap,) = report["gaps"]
    assert gap["task"] == "tickets" and gap["state"] == "blocked" and gap["next_step"] == "fix the input"
    assert "CUST-00042 (Jane Doe)" in gap["message"] and "ambiguous" in gap["message"]
    assert any(finding["record_id"] == "CUST-00042" for finding in report["findings"])


def test_ask_a_partly_understood_question_is_partial_and_says_what_to_do(settings: SourceSettings) -> None:
    done = research(settings, "ask", "refund on ORD-10031 for jane.doe@exmaple.com")
    assert done.returncode == 3, done.stderr
    assert "not researched: a refund on ORD-10031" in done.stdout and "say how much" in done.stdout
    assert "Did you mean jane.doe@example.com?" in done.stdout


HEAVY = ("anthropic", "mcp")  # what a command loads only when it does its work (tests/test_start_up.py)


def test_plan_never_imports_the_claude_stack_nor_the_mcp_sdk() -> None:
    """A plan is read and printed; nothing calls a model or a source, so neither SDK is loaded."""
    outcome = in_a_fresh_process(
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from coordinator.cli import app\n"
        f"result = CliRunner().invoke(app, ['plan', {STORY!r}, '--json'])\n"
        f"print(json.dumps([result.exit_code, result.stdout, [n for n in {HEAVY!r} if n in sys.modules]]))\n"
    )
    exit_code, output, heavy_imported = outcome
    assert exit_code == 0, output
    assert {task["tool"] for task in json.loads(output)["tasks"]} >= {"customer_lookup", "refund_eligibility"}
    assert heavy_imported == []


def test_sources_list_reads_the_catalogue_and_starts_no_source(
    settings: SourceSettings, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    # No source can start with its data folder inside a file: a listing that spawned one would fail.
    nowhere = dataclasses.replace(settings, data_dir=blocker / "data")
    listed = research(nowhere, "sources", "list")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split("│")[1:3] for line in listed.stdout.splitlines() if line.startswith("│")]
    assert {source.strip(): set(tools.strip().split(", ")) for source, tools in rows} == {
        source: set(tools) for source, tools in input_schemas().items()
    }


def test_a_task_still_running_shows_its_seconds_going_up() -> None:
    """While a query waits on a hung source, its line in the live table says for how long, counted
    each time the table is drawn: the screen is never still for 30 s."""
    from rich.console import Console

    from coordinator.planning.planner import plan_query
    from coordinator.reporting.render import LiveProgress
    from subagents.task import Task

    now = [100.0]
    console = Console(width=80, record=True, force_terminal=False)
    progress = LiveProgress(plan_query("open tickets of CUST-00042"), console, clock=lambda: now[0])
    task = Task("tickets", "tickets", "search_tickets", {"customer_id": "CUST-00042"})
    progress.attempt(task, 1, dict(task.arguments))
    now[0] += 12.4

    def line_of(tickets: str) -> str:
        console.print(progress._table())  # what the live display draws at this instant
        return next(
            line for line in console.export_text().splitlines() if line.lstrip("│ ").startswith(tickets)
        )

    assert "attempt 1, 12 s" in line_of("tickets")
    now[0] += 20
    assert "attempt 1, 32 s" in line_of("tickets")
    progress.ended("tickets", "ok", 1, ())
    assert " s" not in line_of("tickets").split("ok", 1)[1]
