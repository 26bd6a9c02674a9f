"""Every command the docs print runs as printed, the way a newcomer types it; the site builds strictly.

The docs are the README, CONTRIBUTING.md and the pages of `docs/`. Their shell blocks (```sh) and their
transcripts (``` blocks whose lines start with `$ `) are read from the files themselves, in that order;
each command is run through `sh` from the project root with `.venv/bin` first on PATH (the README's "put
the venv on PATH"), in the tests' private data folder, on a terminal 80 columns wide (a newcomer's: the
docs show output wrapped as it is there). Which commands run is decided by an explicit allow-list of
prefixes: read-only or self-contained commands run; a fleet runs on free ports and is stopped at the
end; a server (`python -m sources.NAME`) is started, seen ready and stopped; anything else (`make`,
`docker`, long runs) is listed as skipped. Each command must exit with the status the docs give it, with
no traceback, and print the stable lines of the output they show for it.

The site is built as `make docs` serves it, with `mkdocs build --strict` (a missing page or anchor,
an unknown generated part fails), and every link of every built page to the site resolves.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import IO

import pytest

from sources.catalogue import DEFAULT_PORTS, SOURCES
from sources.processes.serve import READY_PREFIX
from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, default_ports_held, free_ports, private_settings

pytestmark = pytest.mark.subprocess

README = PROJECT_ROOT / "README.md"
DOCUMENTS = (README, PROJECT_ROOT / "CONTRIBUTING.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md")))
VENV_BIN = PROJECT_ROOT / ".venv" / "bin"
SH = "/bin/sh"  # each command line runs as a shell reads it: quotes, comments
TIMEOUT = 60.0  # seconds for any one command; the slowest (a source crashing 4 times) takes 8 to 15 s

# Commands run as printed: read-only, or self-contained (a chaos replay uses a world of its own).
RUN = (
    "make demo",
    "research --help",
    "research ask ",
    "research plan ",
    "research sources list",
    "research sources call ",
    "research task ",
    "research traces list",
    "research traces show latest",
    "research chaos run --replay ",
    "research replay ",
    "research batch examples/questions.jsonl --out runs/",  # a batch of twelve: about 8 s
)
# The fleet's commands: run in the docs' order on free ports; the fleet is stopped after the module.
FLEET = (
    "research sources up",
    "research sources status",
    "research chaos status",
    "research sources down",
    "research chaos kill ",
    "research chaos heal ",
    "research chaos hang ",
    "research chaos slow ",
    "research chaos flaky ",
    "research chaos garbage ",
)
# A source on its own: started, seen ready (HTTP) or at its end of input (stdio), stopped.
SERVERS = ("python -m sources.",)
# Allowed by a prefix above, yet not run: why.
NOT_RUN = {
    "--otlp": "needs the Jaeger collector its block starts with docker compose",
    "--scenarios 200": "200 chaos scenarios take about 150 s",
    "--soak": "a soak runs hundreds of queries",
    "hang:tickets": "a hung tickets source is waited for 4 times 5 s (about 28 s)",
    # The registered servers' walk-through asks across servers that `research sources add` registers
    # (npx fetches one): tests/test_bring_your_own.py runs the same flow against the pinned installs.
    "./examples/docs": "asks the filesystem server that `research sources add docs` registers",
    "Asia/Tokyo": "asks the time server that `research sources add time` registers",
    "pip install": "installs into the venv: `make test` installs the Ray extra",
    # tests/test_batch_ray.py runs batches on a local Ray and on a two-node cluster it starts as shown.
    "--engine ray": "a batch on Ray workers: tests/test_batch_ray.py runs batches on Ray",
    "ray start": "a Ray cluster's own commands: tests/test_batch_ray.py starts such a cluster",
    "ray get-auth-token": "a Ray cluster's own commands: tests/test_batch_ray.py starts such a cluster",
}

# The exit status the docs imply. Where it shows a command's output, the output says it: a
# PARTIAL answer exits 3, a COMPLETE one 0, a task that ends escalated 1 (ok or empty 0), a usage
# error (`error: ...`) 2. Commands shown without output exit 0, except these partial answers.
STORY = (
    "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 "
    "is allowed"
)
STATUS = {
    f'research ask "{STORY}"': 3,  # the £750 refund is escalated (the Makefile's demo says so too)
    f'research ask "{STORY}" --faults tickets:transient=0.5,seed=13': 3,
    'research plan "refund on ORD-10031 and tickets since last month"': 3,
    # two of the twelve are partial (shown: not researched)
    "research batch examples/questions.jsonl --out runs/tonight": 3,
    "research batch examples/questions.jsonl --out runs/first": 3,  # the README's, into a folder of its own
    # shown: the courier is not held by any source
    'research plan --explain "Has Yvonne Young reached out to us about her espresso machine? And what\'s the courier for ORD-10768?"': 3,
}
IMPLIED = (("PARTIAL:", 3), ("COMPLETE:", 0), ("-> state escalated", 1), ("-> state ", 0), ("error: ", 2))

# Output that depends on the world's history, not on the command: only its first line is checked.
FIRST_LINE_ONLY = {
    # kb's index warms up on the first start on a world only; the tests' world is warmed up already.
    "research task kb search_policies": "the kb warm-up happens on a world's first start only",
}

# An output line is checked only when nothing in it varies from run to run: no elision, durations,
# pids, trace ids or back-offs.
VARIES = re.compile(
    r"\.\.\.|…"  # trimmed in the docs
    r"|\d+\.\d+ ?m?s\b|\b\d+ m?s\b"  # durations: 1278.0 ms, 0.98 s, 847 ms
    r"|\bpid \d+"
    r"|\b[0-9a-f]{32}\b"  # a trace id
    r"|back-off|retryAfterMs|\bspans\b"
)
# `research task` prints its report as JSON; the docs trim it to a summary line: `-> state ok, 2 attempts`.
SUMMARY = re.compile(r"-> state (\w+), (\d+) attempts?\b")
DRAWING = re.compile(r"[│├└─┌┐┘┬┴┼┃┏┓┗┛━┡┩╇┳┻╭╮╰╯]")


@dataclass(eq=False)
class Command:
    text: str  # as printed, without a trailing comment
    document: str  # relative to the project root
    line: int  # in its document
    block: int  # the commands of one block run in order: later ones rely on earlier ones
    output: list[str] = field(default_factory=list)  # what the docs show it printing

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line} {self.text}"


def _without_comment(line: str) -> str:
    """The line up to a `#` that starts a shell comment (outside quotes, at a word's start)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def readme_blocks(text: str) -> list[tuple[str, int, int, list[str]]]:
    """The fenced blocks: (language, line of the opening fence, line of the closing one, lines)."""
    blocks, opened, language, body = [], 0, "", []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            if opened:
                blocks.append((language, opened, number, body))
                opened, body = 0, []
            else:
                opened, language = number, line[3:].strip()
        elif opened:
            body.append(line)
    return blocks


def document_commands(path: Path, first_block: int = 0) -> list[Command]:
    """Every command of a document's sh blocks and transcripts, with the output it is shown with.

    Blocks are numbered from ``first_block`` on, so that the blocks of all documents are told apart.
    """
    commands: list[Command] = []
    text = path.read_text(encoding="utf-8")
    document = path.relative_to(PROJECT_ROOT).as_posix()
    blocks = readme_blocks(text)
    lines = text.splitlines()
    for number, (language, opened, _closed, body) in enumerate(blocks):
        index = first_block + number
        if language == "sh":
            for offset, line in enumerate(body, start=opened + 1):
                command = _without_comment(line.strip())
                if command:
                    commands.append(Command(command, document, offset, index))
        elif language == "" and any(line.startswith("$ ") for line in body):
            for offset, line in enumerate(body, start=opened + 1):
                if line.startswith("$ "):
                    commands.append(Command(line[2:].strip(), document, offset, index))
                elif commands and commands[-1].block == index:
                    commands[-1].output.append(line)
        elif language == "" and number > 0:
            # A plain block right after a sh block (blank lines between) is its last command's output.
            previous_language, _, previous_closed, _ = blocks[number - 1]
            between = lines[previous_closed : opened - 1]
            if previous_language == "sh" and not any(line.strip() for line in between):
                last = [command for command in commands if command.block == index - 1]
                if last:
                    last[-1].output.extend(body)
    return commands


def docs_commands() -> list[Command]:
    commands: list[Command] = []
    for number, path in enumerate(DOCUMENTS):
        commands += document_commands(path, first_block=1000 * number)
    return commands


COMMANDS = docs_commands()


def kind(command: Command) -> str:
    """`run`, `fleet`, `server`, or why it is not run."""
    for fragment, why in NOT_RUN.items():
        if fragment in command.text:
            return f"not run: {why}"
    if command.text.startswith(RUN):
        return "run"
    if command.text.startswith(FLEET):
        return "fleet"
    if command.text.startswith(SERVERS):
        return "server"
    return "not run: not in the allow-list (not read-only, or long-running)"


def _normalized(text: str) -> str:
    return " ".join(DRAWING.sub(" ", text).split())


def stable_lines(command: Command, ports: dict[str, int]) -> list[str]:
    lines = [line for line in command.output if line.strip()]
    if any(command.text.startswith(prefix) for prefix in FIRST_LINE_ONLY):
        lines = lines[:1]
    # The docs' fleet is on the default ports; this test's fleet is on free ones.
    defaults = {**DEFAULT_PORTS, "coordinator": 8100}
    for name, port in ports.items():
        lines = [line.replace(f"127.0.0.1:{defaults[name]}", f"127.0.0.1:{port}") for line in lines]
    return [line for line in lines if not VARIES.search(line) and not SUMMARY.match(line)]


@dataclass
class Session:
    """What a newcomer's shell holds: the environment, the fleet's ports, the commands already run."""

    environment: dict[str, str]
    ports: dict[str, int]
    scratch: Path  # where what a command writes into the project goes instead (a batch's --out)
    done: set[str] = field(default_factory=set)  # the commands already run, by name


@pytest.fixture(scope="module")
def settings(settings: SourceSettings, tmp_path_factory: pytest.TempPathFactory) -> SourceSettings:
    """The session's settings with a data folder of the module's own: the docs' fleet, traces, keys."""
    return private_settings(settings, tmp_path_factory.mktemp("readme-data"))


@pytest.fixture(scope="module")
def session(settings: SourceSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    assert (VENV_BIN / "research").exists(), "run `make` first: the docs' commands need .venv"
    environment = {
        **os.environ,
        **settings.child_environment(),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "80",  # a newcomer's terminal: the docs show what 80 columns print, wrapped as there
    }
    # Never the real Messages API: no key (the autouse guard removes it only inside each test).
    environment.pop("ANTHROPIC_API_KEY", None)
    environment["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"
    members = (*SOURCES, "coordinator")
    ports = dict(zip(members, free_ports(len(members)), strict=True))
    running = Session(environment, ports, tmp_path_factory.mktemp("docs-scratch"))
    # The docs' fleet is moved off the default ports, which someone else holds the whole time.
    with default_ports_held() as held:
        try:
            yield running
        finally:  # whatever happened, no fleet is left running
            run(running, "research sources down")
    assert held.dialled_from(settings.data_dir) == []  # the docs' fleet moved: nothing dials the defaults


def run(session: Session, command: str) -> subprocess.CompletedProcess[str]:
    """Run one command line through `sh` as a shell does, bounded in time (its whole process group)."""
    process = subprocess.Popen(
        [SH, "-c", command], env=session.environment, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{command!r} still running after {TIMEOUT} s\nstdout:\n{stdout}\nstderr:\n{stderr}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def as_run(command: Command, session: Session) -> str:
    """The command line run: as printed, but a fleet is put on the test's free ports, and what a
    batch writes into the project (`--out runs/tonight`) goes to the session's scratch folder."""
    if command.text.startswith("research sources up"):
        return " ".join([command.text, *(f"--port {name}={port}" for name, port in session.ports.items())])
    return re.sub(r"--out (?!/)(\S+)", lambda out: f"--out {session.scratch / out[1]}", command.text)


def expected_status(command: Command) -> int:
    for line in command.output:
        for start, status in IMPLIED:
            if line.startswith(start):
                return status
    return STATUS.get(command.text, 0)


def check(command: Command, session: Session) -> None:
    """Run the commands of its block it relies on, then it; check its status and output."""
    for earlier in COMMANDS:
        same_block = earlier.block == command.block and earlier.line < command.line
        if same_block and earlier.name not in session.done and kind(earlier) in ("run", "fleet"):
            check(earlier, session)
    session.done.add(command.name)
    status = expected_status(command)
    done = run(session, as_run(command, session))
    printed = done.stdout + done.stderr
    shown = f"{command.name}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, shown
    assert done.returncode == status, f"exit status {done.returncode}, the docs imply {status}: {shown}"
    missing = [
        line for line in stable_lines(command, session.ports) if _normalized(line) not in _normalized(printed)
    ]
    assert not missing, (
        "lines the docs show but the command did not print:\n" + "\n".join(missing) + f"\n{shown}"
    )
    if any(command.text.startswith(prefix) for prefix in FIRST_LINE_ONLY):
        return
    for line in command.output:
        if summary := SUMMARY.match(line):
            report = json.loads(done.stdout)
            state, attempts = summary[1], int(summary[2])
            assert (report["state"], report["attempts"]) == (state, attempts), (
                f"the docs say {line!r}: {shown}"
            )


def check_server(command: Command, session: Session) -> None:
    """A stdio source ends at the end of its input; an HTTP one says it is ready, then stops on SIGTERM."""
    words = shlex.split(command.text)
    if "--http" not in words:
        done = run(session, command.text)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command.name}\n{done.stderr}"
        return
    line, port = command.text, words[words.index("--port") + 1] if "--port" in words else "0"
    if port != "0":
        # The docs name a default port, which a running fleet may hold: the test uses a free one.
        line = line.replace(f"--port {port}", f"--port {(port := str(free_ports(1)[0]))}")
    process = subprocess.Popen(
        [SH, "-c", line], env=session.environment, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()

    def read(stream: IO[str]) -> None:
        for text in stream:
            lines.put(text)
        lines.put(None)  # the end of its stderr

    reader = threading.Thread(target=read, args=(process.stderr,), daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        while not any(text.startswith(READY_PREFIX) for text in seen):
            text = lines.get(timeout=TIMEOUT)
            assert text is not None, f"{command.name} exited before it was ready:\n{''.join(seen)}"
            seen.append(text)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        reader.join(timeout=10)
        assert process.stderr is not None
        process.stderr.close()
    ready = json.loads(seen[-1][len(READY_PREFIX) :])
    assert port == "0" or ready["url"] == f"http://127.0.0.1:{port}/mcp", seen[-1]
    seen.extend(text for text in iter(lines.get_nowait, None))  # what it wrote while stopping
    assert "Traceback" not in "".join(seen), f"{command.name}\n{''.join(seen)}"


RUNNABLE = [command for command in COMMANDS if not kind(command).startswith("not run")]


@pytest.mark.parametrize("command", RUNNABLE, ids=[command.name for command in RUNNABLE])
def test_the_readme_command_runs_as_printed(command: Command, session: Session) -> None:
    if kind(command) == "server":
        check_server(command, session)
    else:
        check(command, session)


def test_what_is_not_run_is_exactly_what_must_not_be() -> None:
    """The commands left out, each for its reason: a new command in the docs is run unless it is listed here."""
    left_out = sorted(command.text[:30] for command in COMMANDS if command not in RUNNABLE)
    assert left_out == sorted(
        [
            "make test",  # the suite itself (the README and the docs' home page)
            "make test",
            "source .venv/bin/activate",  # a shell's own command: what it does, every test here does
            "docker compose up -d",  # Jaeger: no container engine here
            'research ask "Investigate jane',  # ... --otlp, for that Jaeger
            'research ask "Investigate CUST',  # ... --chaos hang:tickets: 28 s of waiting
            "research chaos run --scenarios",  # 200 scenarios: 150 s
            "research compare --scenarios 2",  # 200 scenarios in three modes: about 220 s
            # The batch guide's Ray batches and cluster: tests/test_batch_ray.py runs them.
            "pip install '.[ray]'",
            "research batch examples/questi",
            "research batch examples/questi",
            "research batch examples/questi",
            "ray get-auth-token --generate",
            "ray start --head --port 6379 -",
            "RAY_AUTH_MODE=token RAY_AUTH_T",
            # The registered servers' walk-through: tests/test_bring_your_own.py runs it (pinned installs).
            "research sources add docs --co",  # the README's example, then the guide's
            "research sources add docs --co",
            'research ask "what does ./exam',
            'research ask "what does ./exam',
            "research sources add time --co",
            'research ask "what time is it ',
            'research ask "what is in ./exa',
        ]
    ), left_out


def test_the_readme_finds_its_commands() -> None:
    """The parser sees the blocks the docs have: a guard against it silently finding nothing."""
    texts = [command.text for command in COMMANDS]
    assert "research sources list" in texts and "research sources down" in texts
    assert any(text.startswith("research task kb search_policies") for text in texts)
    assert all(not text.startswith(".venv/") for text in texts), "the README puts the venv on PATH once"
    assert sum(1 for command in COMMANDS if not kind(command).startswith("not run") and command.output) >= 10


def test_the_python_snippet_runs_as_printed(settings: SourceSettings, tmp_path: Path) -> None:
    """The docs' Python block, saved to a file and run with the venv's python, prints the orders.

    The source it spawns sees only HOME and PATH (the mcp SDK's safe subset), so it finds its data in
    the user's cache folder: here a HOME whose cache folder is the tests' data folder.
    """
    (snippet,) = [
        body
        for document in DOCUMENTS
        for language, _, _, body in readme_blocks(document.read_text("utf-8"))
        if language == "python"
    ]
    script = tmp_path / "snippet.py"
    script.write_text("\n".join(snippet) + "\n")
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (home / ".cache" / "research-coordinator").symlink_to(settings.data_dir, target_is_directory=True)
    environment = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    environment.pop("XDG_CACHE_HOME", None)
    environment.pop("RESEARCH_DATA_DIR", None)
    session = Session(environment, {}, tmp_path)
    done = run(session, f"python {shlex.quote(str(script))}")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "'ORD-10023'" in done.stdout and "'resultCount': 3" in done.stdout, done.stdout


def test_every_example_file_the_docs_name_is_shipped_and_reads() -> None:
    """A newcomer copies `research batch examples/questions.jsonl ...`: the file is there, and every
    line of it is a question the batch accepts."""
    from coordinator.batch.questions import read_questions

    absent_on_purpose = {"examples/docs/returns.md"}  # the docs' file that is not there (ENOENT)
    text = "".join(document.read_text(encoding="utf-8") for document in DOCUMENTS)
    named = sorted(set(re.findall(r"\bexamples/[\w./-]*\w", text)))
    assert "examples/questions.jsonl" in named and absent_on_purpose <= set(named)
    missing = [path for path in named if not (PROJECT_ROOT / path).exists()]
    assert missing == sorted(absent_on_purpose)
    assert len(read_questions(PROJECT_ROOT / "examples" / "questions.jsonl")) == 12


class _Links(HTMLParser):
    """The links (href, src) and the element ids of one built page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.links.append(value)
            elif name == "id" and value:
                self.ids.add(value)


def _parsed(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as CI builds it: strictly, so that any warning (a missing page, an anchor that
    is not there, a generated part that fails) fails the build."""
    built = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [VENV_BIN / "mkdocs", "build", "--strict", "--site-dir", built], cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=TIMEOUT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return built


def test_the_site_builds_strictly_with_every_page_and_its_generated_reference(site: Path) -> None:
    pages = {page.relative_to(site).as_posix() for page in site.rglob("index.html")}
    for source in (PROJECT_ROOT / "docs").rglob("*.md"):
        page = source.relative_to(PROJECT_ROOT / "docs").with_suffix("").as_posix()
        assert ("index.html" if page == "index" else f"{page}/index.html") in pages, page
    # The reference is generated from the code: every command, every report field, every setting.
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert all(f"research {name}" in cli for name in ("ask", "batch", "replay", "chaos kill", "sources add"))
    report = (site / "reference" / "report" / "index.html").read_text(encoding="utf-8")
    assert "trace_id" in report and "<code>Gap</code>" in report
    variables = (site / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    assert all(
        name in variables
        for name in ("RESEARCH_SEED", "RESEARCH_HTTP_MAX_SESSIONS", "RESEARCH_CLAUDE_MAX_TURNS")
    )
    errors = (site / "reference" / "errors" / "index.html").read_text(encoding="utf-8")
    assert all(f'<h3 id="{model}">' in errors for model in ("toolerror", "attemptedquery", "escalation"))
    assert all(
        f"<code>{category}</code>" in errors
        for category in ("transient", "validation", "business", "permission")
    )


def test_every_link_of_the_built_site_to_the_site_resolves(site: Path) -> None:
    """Every href and src of every page that points into the site names a file that is there, and
    an anchor that page has."""
    broken, checked = [], 0
    for page in site.rglob("*.html"):
        for link in _parsed(page).links:
            if re.match(r"^[a-z][a-z0-9+.-]*:|^//", link):  # another site (https:, mailto:, data:)
                continue
            checked += 1
            path, _, anchor = link.partition("#")
            # The 404 page links from the site's root (it is served at any depth); the others relatively.
            base = site if path.startswith("/") else page.parent
            target = (base / path.lstrip("/")).resolve() if path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif anchor and target.suffix == ".html" and anchor not in _parsed(target).ids:
                broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert checked > 500 and not broken, "\n".join(broken)


# A file named in code type in the docs (`sources/contract.py`) is one of the repository's: a page moved or
# a module renamed leaves no name behind. Left out: placeholders (`DIR/reports/ID.json`), a user's own
# folder (`./research.toml`) and a path a question names (`docs/a.md`).
NAMED_FILE = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|toml|json|jsonl|md|yml|yaml|png|css))`")
NOT_FILES = re.compile(r"\b[A-Z]{2,}\b|^\./|^docs/a\.md$")


def test_every_file_the_docs_name_is_in_the_repository() -> None:
    named = {
        (document.relative_to(PROJECT_ROOT).as_posix(), path)
        for document in DOCUMENTS
        for path in NAMED_FILE.findall(document.read_text(encoding="utf-8"))
    }
    assert len(named) > 100, "the pattern finds the files the docs name"
    missing = sorted(
        f"{document}: {path}"
        for document, path in named
        if not NOT_FILES.search(path) and not (PROJECT_ROOT / path).exists()
    )
    assert not missing, "\n".join(missing)
