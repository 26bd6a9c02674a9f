"""Run every benchmark in benchmarks/, then `research compare`, and write one dated results file.

Why: each benchmark is a standalone script whose figures were once copied into the README by hand, from
runs on different days. `make bench` runs them all in one sitting, one at a time (the machine has
two cores and the figures are timings: two benchmarks side by side would measure each other), then
the comparison of the generic, generic-abort and structured recovery modes, and records the whole
run in ``benchmarks/results/YYYY-MM-DD.md`` (copied to ``latest.md``, the stable path the docs
links), the comparison's chart beside it as ``YYYY-MM-DD-compare.png``.

Each benchmark's section has its title (its docstring's first sentence), the command that ran and a
table of the figures it printed with their baselines and ratios, parsed from the printed lines where
they have a regular shape (the numbers are copied as printed, never recomputed), and its printed
output verbatim. A step that fails or times out is recorded with its exit status and the last lines
of its stderr; the others still run, and the exit status is 1.

    .venv/bin/python benchmarks/run_all.py [--only NAME ...] [--scenarios 200] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
# The installed `research` script beside this interpreter, or the same entry point from the checkout.
INSTALLED = Path(sys.executable).parent / "research"
RESEARCH = (
    [str(INSTALLED)]
    if INSTALLED.exists()
    else [sys.executable, "-c", "from coordinator.cli import app; app()"]
)
COMPARE = "compare"
MODES = ("generic", "generic-abort", "structured")
SEED = 1
STDERR_TAIL = 30  # lines of a failed step's stderr kept in the results file
NO = "—"

# One row of a benchmark's table: figure, measured, baseline, ratio, target (as printed).
Row = tuple[str, str, str, str, str]


@dataclass(frozen=True)
class Step:
    name: str
    title: str
    argv: list[str]
    shown: str  # the command as a person types it, for the results file


@dataclass(frozen=True)
class Outcome:
    step: Step
    status: int | None  # None: killed at the timeout
    seconds: float
    stdout: str
    stderr: str
    problem: str = ""  # why a step that exited 0 still failed (the compare's output is not its JSON)

    @property
    def ok(self) -> bool:
        return self.status == 0 and not self.problem


# --- the steps -------------------------------------------------------------------------------------


def benchmark_scripts() -> dict[str, Path]:
    """Every benchmark script in benchmarks/, by name: the .py files but this one and the package's."""
    skip = {"__init__.py", Path(__file__).name}
    return {path.stem: path for path in sorted(HERE.glob("*.py")) if path.name not in skip}


def title_of(script: Path) -> str:
    """The first sentence of the script's docstring (its first paragraph, lines joined)."""
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or script.stem
    paragraph = " ".join(docstring.split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s", paragraph, maxsplit=1)[0]


def relative(path: Path | str) -> str:
    """A path as typed from the checkout's root (the interpreter as .venv/bin/python)."""
    try:
        return str(Path(path).relative_to(ROOT))
    except ValueError:
        return str(path)


def plan_steps(names: list[str], scenarios: int, chart: Path) -> list[Step]:
    """The steps to run, in order: the benchmarks chosen (by name, alphabetically), then the compare."""
    steps = []
    for name, script in benchmark_scripts().items():
        if name in names:
            argv = [sys.executable, str(script)]
            steps.append(
                Step(name, title_of(script), argv, shlex.join([relative(sys.executable), relative(script)]))
            )
    if COMPARE in names:
        options = ["--scenarios", str(scenarios), "--seed", str(SEED), "--json", "--plot"]
        title = "The recovery modes side by side on the same scenarios: generic, generic-abort, structured."
        shown = shlex.join(
            [relative(RESEARCH[0]) if len(RESEARCH) == 1 else "research", COMPARE, *options, relative(chart)]
        )
        steps.append(Step(COMPARE, title, [*RESEARCH, COMPARE, *options, str(chart)], shown))
    return steps


# --- running ---------------------------------------------------------------------------------------


def execute(
    argv: list[str], timeout_s: float, env: dict[str, str] | None = None
) -> tuple[int | None, str, str]:
    """Run one command in its own process group: its status (None if killed at the timeout), stdout
    and stderr. At the timeout, or if this run is interrupted, the whole group is killed, so a
    benchmark's own children (sources, fleets) do not outlive it. ``env``: the command's environment
    (None: this one's)."""
    with subprocess.Popen(  # noqa: S603  (this checkout's own scripts and command, listed above)
        argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, encoding="utf-8", errors="replace", start_new_session=True,
    ) as process:  # fmt: skip
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
            return process.returncode, stdout, stderr
        except subprocess.TimeoutExpired:
            kill_group(process.pid)
            try:
                stdout, stderr = process.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # a grandchild in a session of its own holds the pipes
                stdout, stderr = "", "(the output could not be read after the kill)"
            return None, stdout, stderr
        except BaseException:
            kill_group(process.pid)
            raise


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def run_step(step: Step, number: int, total: int, timeout_s: float) -> Outcome:
    """Run one step, saying on stderr when it starts and how it ended."""
    say(f"[bench {number}/{total}] {step.name}: started: {step.shown}")
    started = time.perf_counter()
    status, stdout, stderr = execute(step.argv, timeout_s)
    seconds = time.perf_counter() - started
    problem = ""
    if step.name == COMPARE and status == 0 and compare_report(stdout) is None:
        problem = "its output is not the JSON report expected (modes, scenarios, seed)"
    outcome = Outcome(step, status, seconds, stdout, stderr, problem)
    say(f"[bench {number}/{total}] {step.name}: {verdict(outcome)}, {seconds:.1f} s")
    return outcome


def verdict(outcome: Outcome) -> str:
    if outcome.status is None:
        return "FAILED: timed out, killed"
    if outcome.status != 0:
        return f"FAILED: exit status {outcome.status}"
    return f"FAILED: {outcome.problem}" if outcome.problem else "ok"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- parsing what the benchmarks print -------------------------------------------------------------


def matching(text: str, pattern: str) -> list[dict[str, str]]:
    """The named groups of every printed line (stripped) that the pattern matches whole."""
    regex = re.compile(pattern)
    return [
        match.groupdict(default="") for line in text.splitlines() if (match := regex.fullmatch(line.strip()))
    ]


def parse_startup(text: str) -> list[Row]:
    found = matching(
        text,
        r"(?P<name>.+?)\s+(?P<median>\d+\.\d+)s\s+(?P<fastest>\d+\.\d+)s\s+(?P<ratio>\d+\.\d+)x"
        r"\s+(?P<cpu>\d+\.\d+)s\s*(?P<target>.*)",
    )
    base = next(row for row in found if row["name"].startswith("baseline"))
    return [
        (
            row["name"],
            f"median {row['median']} s (fastest {row['fastest']} s, CPU {row['cpu']} s)",
            NO if row is base else f"{base['name'].removeprefix('baseline: ')}: {base['median']} s",
            f"{row['ratio']}x",
            row["target"],
        )
        for row in found
    ]


def parse_answers(text: str) -> list[Row]:
    found = matching(text, r"(?P<name>.+?)\s+(?P<value>\d+\.\d+) s\s+(?P<ratio>\d+\.\d+)x the floor")
    floor = found[0]
    rows: list[Row] = [
        (
            row["name"],
            f"{row['value']} s",
            NO if row is floor else f"the floor: {floor['value']} s",
            f"{row['ratio']}x",
            "",
        )
        for row in found
    ]
    for past in matching(
        text, r"past the deadline, worst median: (?P<value>\S+ s) \(target (?P<target>[^)]*)\).*"
    ):
        rows.append(("past the deadline, worst median", past["value"], "the deadline", NO, past["target"]))
    return rows


def quantiles(text: str) -> dict[str, str]:
    """The lines `NAME  p50 X ms   p90 Y ms`, by name."""
    pattern = r"(?P<name>.+?)\s+p50\s+(?P<p50>[\d.]+) ms\s+p90\s+(?P<p90>[\d.]+) ms"
    return {row["name"]: f"p50 {row['p50']} ms, p90 {row['p90']} ms" for row in matching(text, pattern)}


def parse_subagent_overhead(text: str) -> list[Row]:
    paths = quantiles(text)
    (ratio,) = matching(text, r"ratio of p50s: (?P<ratio>[\d.]+) \(target (?P<target>[^)]*)\).*")
    baseline = f"bare Client.call_tool: {paths['bare Client.call_tool']}"
    return [
        (
            "through a subagent",
            paths["through a subagent"],
            baseline,
            f"{ratio['ratio']} (p50s)",
            ratio["target"],
        )
    ]


def parse_http_vs_stdio(text: str) -> list[Row]:
    paths = quantiles(text)
    rows: list[Row] = []
    pattern = r"HTTP/stdio ratio of p50s, (?P<way>\w+): (?P<ratio>[\d.]+) \(target (?P<target>[^)]*)\).*"
    for ratio in matching(text, pattern):
        http, stdio = f"http {ratio['way']}", f"stdio {ratio['way']}"
        rows.append(
            (http, paths[http], f"{stdio}: {paths[stdio]}", f"{ratio['ratio']} (p50s)", ratio["target"])
        )
    return rows


def parse_fork_server(text: str) -> list[Row]:
    forked, spawned = matching(text, r"story, sources (?P<way>\w+) .*median (?P<value>[\d.]+) s .*")
    (ratio,) = matching(text, r"spawned / forked: (?P<ratio>[\d.]+x) .*")
    baseline = f"sources forked: median {forked['value']} s"
    return [("story, sources spawned", f"median {spawned['value']} s", baseline, ratio["ratio"], "")]


def parse_claude_subagent_overhead(text: str) -> list[Row]:
    bare, ours = matching(text, r"(?P<name>.+?): p50 (?P<p50>[\d.]+) ms per loop.*")
    (ratio,) = matching(text, r"ratio: (?P<ratio>[\d.]+), .*")
    baseline = f"{bare['name']}: p50 {bare['p50']} ms"
    return [(ours["name"], f"p50 {ours['p50']} ms per loop", baseline, ratio["ratio"], "")]


def parse_tracing_overhead(text: str) -> list[Row]:
    (medians,) = matching(
        text, r"tracing to files: median (?P<on>[\d.]+) ms; tracing off: median (?P<off>[\d.]+) ms"
    )
    (overhead,) = matching(text, r"overhead: (?P<value>\S+ %) \(target (?P<target>[^)]*)\).*")
    measured, baseline = f"median {medians['on']} ms", f"tracing off: median {medians['off']} ms"
    return [("tracing to files", measured, baseline, f"{overhead['value']} overhead", overhead["target"])]


def parse_fanout(text: str) -> list[Row]:
    pattern = (
        r"(?P<name>.+?):\s+median (?P<value>\d+) ms = (?P<ratio>[\d.]+) x (?P<limit>\d+) ms"
        r"(?P<why>[^(]*)(?: \(target (?P<target>[^)]*)\))?"
    )
    return [
        (
            row["name"],
            f"median {row['value']} ms",
            f"{row['limit']} ms{row['why']}",
            f"{row['ratio']}x",
            row["target"],
        )
        for row in matching(text, pattern)
    ]


def parse_planner(text: str) -> list[Row]:
    rows: list[Row] = []
    corpus = ""
    for line in text.splitlines():
        if match := re.fullmatch(r"corpus: (?P<name>[^,]+), .*", line):
            corpus = match["name"]
        elif match := re.fullmatch(r"accuracy: (?P<value>.+?) \(target (?P<target>[^)]*)\)", line):
            rows.append((f"{corpus}: accuracy", match["value"], NO, NO, match["target"]))
        elif match := re.fullmatch(r"false complete: (?P<value>\d+) \(target (?P<target>[^)]*)\)", line):
            rows.append((f"{corpus}: false complete", match["value"], NO, NO, match["target"]))
        elif match := re.fullmatch(
            r"planning per query: (?P<value>.+?) \(target (?P<target>[^)]*)\); of which (?P<of>.+)", line
        ):
            rows.append(
                (
                    f"{corpus}: planning per query",
                    f"{match['value']} (of which {match['of']})",
                    NO,
                    NO,
                    match["target"],
                )
            )
    return rows


# The benchmarks whose printed lines have a regular shape; the others are shown as printed.
def parse_batch(text: str) -> list[Row]:
    (base,) = matching(text, r"research ask one after another: (?P<value>[\d.]+) questions/s \((?P<how>.*)\)")
    pattern = (
        r"(?P<name>.+?): (?P<value>[\d.]+) questions/s \((?P<ratio>[\d.]+)x research ask one after another\)"
    )
    baseline = f"research ask one after another: {base['value']} questions/s (sample)"
    rows: list[Row] = [
        (row["name"], f"{row['value']} questions/s", baseline, f"{row['ratio']}x", "")
        for row in matching(text, pattern)
    ]
    (violations,) = matching(text, r"invariant violations: (?P<value>\d+)")
    rows.append(("invariant violations", violations["value"], NO, NO, "0"))
    return rows


def parse_oversized_inputs(text: str) -> list[Row]:
    """A row per case: its peak after, beside the code before when run with ``--before``."""
    pattern = r"(?P<case>[a-z-]+) +(?P<code>after|before \(\w+\)) +(?P<peak>\d+)  (?P<outcome>.*)"
    peaks: dict[str, dict[str, str]] = {}
    for line in matching(text, pattern):
        peaks.setdefault(line["case"], {})["after" if line["code"] == "after" else "before"] = line["peak"]
    rows: list[Row] = []
    for case, peak in peaks.items():
        before = peak.get("before")
        ratio = f"{int(peak['after']) / int(before):.2f}" if before else NO
        rows.append(
            (
                f"{case}: peak memory",
                f"{peak['after']} MB",
                f"before: {before} MB" if before else NO,
                ratio,
                "bounded",
            )
        )
    return rows


PARSERS: dict[str, Callable[[str], list[Row]]] = {
    "batch": parse_batch,
    "startup": parse_startup,
    "answers": parse_answers,
    "subagent_overhead": parse_subagent_overhead,
    "http_vs_stdio": parse_http_vs_stdio,
    "fork_server": parse_fork_server,
    "claude_subagent_overhead": parse_claude_subagent_overhead,
    "tracing_overhead": parse_tracing_overhead,
    "fanout": parse_fanout,
    "planner": parse_planner,
    "oversized_inputs": parse_oversized_inputs,
}


def figures(outcome: Outcome) -> list[Row]:
    """The rows of a benchmark's table, or none if its output does not have the shape expected."""
    parser = PARSERS.get(outcome.step.name)
    if parser is None or not outcome.ok:
        return []
    try:
        return parser(outcome.stdout)
    except (KeyError, ValueError, StopIteration, IndexError):  # a line missing or repeated: shown as printed
        return []


@dataclass(frozen=True)
class Comparison:
    modes: dict[str, dict[str, object]]  # mode -> figure -> value
    scenarios: object
    seed: object


def compare_report(stdout: str) -> Comparison | None:
    """`research compare --json`'s report, or None if the output is not that report."""
    try:
        report = json.loads(stdout)
    except ValueError:
        return None
    modes = report.get("modes") if isinstance(report, dict) else None
    if not isinstance(modes, dict) or not all(isinstance(values, dict) for values in modes.values()):
        return None
    return Comparison(
        {str(mode): dict(values) for mode, values in modes.items()},
        report.get("scenarios"),
        report.get("seed"),
    )


# --- the results file ------------------------------------------------------------------------------


def cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(map(cell, row)) + " |" for row in rows]


def fenced(text: str) -> list[str]:
    fence = "````" if "```" in text else "```"
    return [fence + "text", text.rstrip("\n"), fence]


def failure(outcome: Outcome) -> list[str]:
    """What a failed step leaves in the results file: how it ended and the end of its stderr."""
    lines = [f"**{verdict(outcome)}** after {outcome.seconds:.1f} s.", ""]
    tail = outcome.stderr.rstrip("\n").splitlines()[-STDERR_TAIL:]
    if tail:
        said = "The last line" if len(tail) == 1 else f"The last {len(tail)} lines"
        lines += [f"{said} of stderr:", "", *fenced("\n".join(tail)), ""]
    if outcome.stdout.strip():
        lines += ["Printed on stdout:", "", *fenced(outcome.stdout), ""]
    return lines


def benchmark_section(outcome: Outcome) -> list[str]:
    step = outcome.step
    lines = [f"## {step.name}: {step.title}", "", f"`{step.shown}`", ""]
    if not outcome.ok:
        return lines + failure(outcome)
    lines += [f"Ran in {outcome.seconds:.1f} s.", ""]
    rows = figures(outcome)
    if not rows:
        return lines + fenced(outcome.stdout) + [""]
    lines += table(["Figure", "Measured", "Baseline", "Ratio", "Target"], [list(row) for row in rows])
    lines += ["", "<details><summary>As printed</summary>", "", *fenced(outcome.stdout), "", "</details>", ""]
    return lines


def number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def ratio(measured: object, baseline: object) -> str:
    """measured / baseline to two places, for two numbers (not booleans) with a baseline other than 0."""
    if isinstance(measured, bool) or isinstance(baseline, bool):
        return NO
    if isinstance(measured, int | float) and isinstance(baseline, int | float) and baseline != 0:
        return f"{measured / baseline:.2f}"
    return NO


def compare_section(outcome: Outcome, chart: Path) -> list[str]:
    step = outcome.step
    lines = [f"## {step.name}: {step.title}", "", f"`{step.shown}`", ""]
    report = compare_report(outcome.stdout) if outcome.ok else None
    if report is None:
        return lines + failure(outcome)
    lines += [f"{report.scenarios} scenarios, seed {report.seed}; ran in {outcome.seconds:.1f} s.", ""]
    modes = {mode: report.modes.get(mode, {}) for mode in MODES}
    names = list(dict.fromkeys(name for values in modes.values() for name in values))
    rows = [
        [
            name,
            *(number(modes[mode].get(name, NO)) for mode in MODES),
            ratio(modes["structured"].get(name), modes["generic"].get(name)),
        ]
        for name in names
    ]
    lines += [*table(["Figure", *MODES, "structured / generic"], rows), ""]
    if chart.exists():
        return [*lines, f"Chart: [![the three modes]({chart.name})]({chart.name})", ""]
    return [*lines, f"(No chart: `{chart.name}` was not written.)", ""]


def git(*arguments: str) -> str:
    """A read-only git command on this checkout (no index refresh: others may be using it)."""
    command = ["git", "--no-optional-locks", "-C", str(ROOT), *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=True)  # noqa: S603
    return done.stdout.strip()


def checkout() -> str:
    """The commit the run measured, and whether the work tree differed from it."""
    try:
        commit, changed = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain")
    except (OSError, subprocess.SubprocessError):
        return "commit unknown"
    return f"commit {commit}" + (", with uncommitted changes" if changed else "")


def document(day: str, outcomes: list[Outcome], chart: Path, total_s: float) -> str:
    """The whole results file."""
    failed = [outcome for outcome in outcomes if not outcome.ok]
    machine = (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    lines = [
        f"# Benchmarks, {day}",
        "",
        f"`make bench` (`benchmarks/run_all.py`): {plural(len(outcomes), 'step')}, one at a time, in {total_s:.0f} s; "
        f"{len(failed)} failed. {machine}; {checkout()}.",
        "",
    ]
    summary = [[o.step.name, verdict(o), f"{o.seconds:.1f} s"] for o in outcomes]
    lines += [*table(["Step", "Result", "Time"], summary), ""]
    for outcome in outcomes:
        section = (
            compare_section(outcome, chart) if outcome.step.name == COMPARE else benchmark_section(outcome)
        )
        lines += section
    return "\n".join(lines).rstrip("\n") + "\n"


# --- the command line ------------------------------------------------------------------------------


def options(argv: list[str] | None) -> argparse.Namespace:
    names = [*benchmark_scripts(), COMPARE]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", action="append", choices=names, metavar="NAME",
        help=f"run only this step (repeatable); one of: {', '.join(names)}",
    )  # fmt: skip
    parser.add_argument("--scenarios", type=int, default=200, help="scenarios for `research compare` (200)")
    parser.add_argument(
        "--out", type=Path, default=HERE / "results", help="where the results go (benchmarks/results)"
    )
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds a step may take before it is killed (900)"
    )
    parsed = parser.parse_args(argv)
    parsed.only = parsed.only or names
    return parsed


LATEST_CHART = "latest-compare.png"


def main(argv: list[str] | None = None) -> int:
    chosen = options(argv)
    day = datetime.date.today().isoformat()
    out: Path = chosen.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    chart = out / f"{day}-compare.png"
    steps = plan_steps(chosen.only, chosen.scenarios, chart)
    started = time.perf_counter()
    outcomes = [run_step(step, number, len(steps), chosen.timeout) for number, step in enumerate(steps, 1)]
    total_s = time.perf_counter() - started
    text = document(day, outcomes, chart, total_s)
    (out / f"{day}.md").write_text(text, encoding="utf-8")
    if chart.exists():  # the stable pair the docs show: latest.md and its chart
        shutil.copyfile(chart, out / LATEST_CHART)
    (out / "latest.md").write_text(text.replace(chart.name, LATEST_CHART), encoding="utf-8")
    failed = [outcome.step.name for outcome in outcomes if not outcome.ok]
    say(f"[bench] {plural(len(steps), 'step')} in {total_s:.1f} s; failed: {', '.join(failed) or 'none'}")
    say(f"[bench] wrote {relative(out / f'{day}.md')} and {relative(out / 'latest.md')}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
