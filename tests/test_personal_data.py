"""No personal data in what the project keeps beyond the answer: span attributes and events, Jaeger,
`research traces list/show`, recordings, logs. The report a user asked for keeps its findings.

The personal data is generated (phone numbers in three national and international forms, Luhn-valid card
numbers with spaces and dashes, a UK address with its postcode, names a question gives, a world customer's
name, an email), planted in a question and in what a registered third-party server (the filesystem server,
a real process added with `research sources add`) answers; then every file of the data folder and what a
real Jaeger received are searched for it. Ordinary ids, amounts and dates must stay readable.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sources.people import customer_names
from sources.settings import SourceSettings
from tests.conftest import PROJECT_ROOT, private_settings
from tests.jaeger import Jaeger, running_jaeger
from tests.third_party import FILESYSTEM_PACKAGE, INTEROP
from traces.logs import RedactingFormatter
from traces.personal import know_names
from traces.redact import for_trace, redact
from traces.stand_ins import pseudonymous

PHONES = ["07700 900123", "+44 7700 900456", "(415) 555-0132", "+1 415-555-0177", "020 7946 0958"]
ADDRESS = "14 Acacia Avenue, Leeds LS1 4AP"
ORDINARY = ["ORD-10023", "CUST-00042", "SKU-4417-BLK", "£750", "2026-11-30", "KB-REFUNDS"]


def luhn_valid(rng: random.Random, length: int = 16) -> str:
    """A made-up card number of ``length`` digits whose last digit makes the Luhn sum a multiple of 10."""
    body = [rng.randint(0, 9) for _ in range(length - 1)]
    total = sum(digit if i % 2 else (digit * 2 - 9 if digit * 2 > 9 else digit * 2)
                for i, digit in enumerate(reversed(body)))  # fmt: skip
    return "".join(map(str, body)) + str(-total % 10)


def cards(seed: int) -> list[str]:
    rng = random.Random(seed)
    plain = [luhn_valid(rng), luhn_valid(rng), luhn_valid(rng, 15)]
    return [
        " ".join(re.findall("....?", plain[0])),  # 4111 1111 1111 1111
        "-".join(re.findall("....?", plain[1])),  # 4111-1111-1111-1111
        plain[2],  # 15 digits in a row (an American Express length)
    ]


def raw_forms(value: str) -> list[str]:
    """``value`` and, for a number, its digits alone: neither may be kept."""
    digits = re.sub(r"\D", "", value)
    return [value, digits] if len(digits) >= 10 and not value.startswith(("CUST", "ORD")) else [value]


def personal_text(seed: int, world_name: str) -> tuple[str, list[str]]:
    """A text holding every kind, and the values that must not be kept."""
    card_numbers = cards(seed)
    text = (
        f"From: Sarah Connor. Mrs Okafor and {world_name} called about ORD-10023 (CUST-00042, £750, "
        f"2026-11-30, SKU-4417-BLK, KB-REFUNDS). Phones: {', '.join(PHONES)}. "
        f"Cards: {', '.join(card_numbers)}. Ship to {ADDRESS}. Write to sarah.connor@example.org."
    )
    planted = ["Sarah Connor", "Okafor", world_name, *PHONES, *card_numbers, "Acacia Avenue", "LS1 4AP",
               "sarah.connor@example.org"]  # fmt: skip
    return text, planted


@pytest.fixture
def known() -> Iterator[str]:
    know_names(["Imogen Hartley-Price"])
    yield "Imogen Hartley-Price"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_kind_is_redacted_and_ordinary_ids_are_kept(known: str, seed: int) -> None:
    text, planted = personal_text(seed, known)
    kept = str(redact({"query": text, "arguments": {"identifier": "CUST-00042", "note": text}}))
    for value in planted:
        for form in raw_forms(value):
            assert form not in kept, (form, kept)
    for ordinary in ORDINARY:
        assert ordinary in kept, (ordinary, kept)
    for kind in ("name", "phone", "card", "address", "email"):
        assert f"[redacted {kind}]" in kept
    assert "'identifier': 'CUST-00042'" in kept  # a record id, not a person


@pytest.mark.parametrize("question", ["who is Jane Doe?", "Mr Patel phoned", "from: Sarah Connor"])
def test_a_name_a_question_gives_is_redacted(question: str) -> None:
    kept = str(for_trace(question))
    assert "[redacted name]" in kept and not ({"Jane", "Doe", "Patel", "Sarah", "Connor"} & set(kept.split()))


def test_a_recording_stands_in_for_every_kind_with_the_same_shape(known: str) -> None:
    text, planted = personal_text(7, known)
    kept = pseudonymous({"query": text, "answer": {"structuredContent": {"body": text}}})
    assert kept["query"] == kept["answer"]["structuredContent"]["body"]  # equal values, equal stand-ins
    for value in planted:
        assert value not in kept["query"], value
    assert len(kept["query"]) == len(text)  # each stand-in the shape of what it replaces
    assert re.sub(r"[A-Za-z]", "a", re.sub(r"\d", "0", kept["query"])) == re.sub(
        r"[A-Za-z]", "a", re.sub(r"\d", "0", text)
    )
    for ordinary in ORDINARY:
        assert ordinary in kept["query"], ordinary


def test_a_log_line_and_its_traceback_are_redacted(known: str) -> None:
    text, planted = personal_text(11, known)
    try:
        raise ValueError(text)
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "asked %s", (text,), sys.exc_info())
    line = RedactingFormatter("%(message)s").format(record)
    assert "ValueError" in line and "ORD-10023" in line
    for value in planted:
        assert value not in line, value


# --- end to end: a question and a registered server's answers, the data folder and Jaeger -----------


@pytest.fixture(scope="module")
def jaeger() -> Iterator[Jaeger]:
    with running_jaeger() as running:
        yield running


def research_cli(
    settings: SourceSettings, registry: Path, *args: str, environment: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **settings.child_environment(), "COLUMNS": "250",
                   "RESEARCH_SOURCES": str(registry), **(environment or {})}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *args],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def filesystem_command(folder: Path) -> str:
    node = shutil.which("node")
    server = INTEROP / "node_modules" / FILESYSTEM_PACKAGE / "dist" / "index.js"
    if node is None or not server.is_file():
        pytest.skip(f"node and {FILESYSTEM_PACKAGE} in tests/interop are needed: run `make test`")
    return f"{node} {server} {folder}"


@pytest.mark.subprocess
def test_no_personal_data_in_the_data_folder_or_in_jaeger(
    settings: SourceSettings, jaeger: Jaeger, tmp_path: Path
) -> None:
    settings = private_settings(settings, tmp_path / "data")  # a data folder of this test's alone
    world_name = customer_names(settings.data_dir, settings.seed)[9]
    answer, planted_in_answer = personal_text(5, world_name)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "case.md").write_text(f"# Case notes\n\n{answer}\n", encoding="utf-8")
    registry = tmp_path / "research.toml"
    added = research_cli(
        settings, registry, "sources", "add", "docs", "--command", filesystem_command(notes),
        "--plan", "read_text_file:path=file",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr

    card = cards(9)[1]
    question = (
        f"what does {notes}/case.md say? who is Jane Doe, and what tickets does CUST-00042 have? "
        f"from: Priya Raman, phone 07700 900321 or (212) 555-0199, card {card}, "
        f"address 3 Mill Lane, York YO1 7HH, email priya.raman@example.net"
    )
    planted = [*planted_in_answer, "Jane Doe", "Priya Raman", "07700 900321", "(212) 555-0199", card,
               "Mill Lane", "YO1 7HH", "priya.raman@example.net"]  # fmt: skip
    otlp = {"OTEL_TRACES_EXPORTER": "file", "OTEL_EXPORTER_OTLP_ENDPOINT": jaeger.otlp,
            "OTEL_EXPORTER_OTLP_TIMEOUT": "10"}  # fmt: skip
    asked = research_cli(settings, registry, "ask", question, "--otlp", "--json", environment=otlp)
    assert asked.returncode in (0, 3), asked.stderr
    report = json.loads(asked.stdout)
    findings = json.dumps(report["findings"], ensure_ascii=False)
    assert PHONES[0] in findings and world_name in findings  # the report keeps what the user asked for

    stored = json.dumps(jaeger.trace(report["trace_id"], services=2), ensure_ascii=False)
    listed = research_cli(settings, registry, "traces", "list")
    shown = research_cli(settings, registry, "traces", "show", report["trace_id"])
    kept = {"jaeger": stored, "traces list": listed.stdout, "traces show": shown.stdout,
            "stderr": asked.stderr + listed.stderr + shown.stderr}  # fmt: skip
    files = [path for path in settings.data_dir.rglob("*") if path.is_file()]
    # The world's own data (the sources' databases) is what they answer from, not a record of a run.
    world = [path for path in files if path.parent.name.startswith("world-v")]
    for path in set(files) - set(world):
        kept[str(path.relative_to(settings.data_dir))] = path.read_text(encoding="utf-8", errors="replace")
    assert any(name.startswith("traces/recordings/") for name in kept) and "logs/docs.log" in kept
    for where, text in kept.items():
        for value in planted:
            for form in raw_forms(value):
                assert form not in text, f"{form!r} is in {where}"
    assert "CUST-00042" in stored and "[redacted phone]" in stored  # ids kept, the trace still useful


CHATTY_SERVER = '''
import sys
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("chatty")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def lookup(key: str) -> str:
    """Look a key up, and log what was asked and answered, as many servers do."""
    print(f"lookup {key}: answered {sys.argv[1]}", file=sys.stderr, flush=True)
    return "found"


server.run()
'''


@pytest.mark.subprocess
def test_a_registered_servers_own_log_is_kept_redacted(settings: SourceSettings, tmp_path: Path) -> None:
    """What a registered server prints on stderr is kept in the data folder's ``logs/NAME.log``: redacted,
    whatever the server chose to log (the question's text, the records it answered)."""
    settings = private_settings(settings, tmp_path / "data")
    world_name = customer_names(settings.data_dir, settings.seed)[3]
    answer, planted = personal_text(11, world_name)
    server = tmp_path / "chatty_server.py"
    server.write_text(CHATTY_SERVER, encoding="utf-8")
    registry = tmp_path / "research.toml"
    command = shlex.join([sys.executable, str(server), answer])
    added = research_cli(settings, registry, "sources", "add", "chatty", "--command", command)
    assert added.returncode == 0, added.stderr
    key = f"{PHONES[2]} for {world_name}"
    called = research_cli(settings, registry, "sources", "call", "chatty", "lookup", json.dumps({"key": key}))
    assert called.returncode == 0, called.stderr
    log = (settings.data_dir / "logs" / "chatty.log").read_text(encoding="utf-8")
    assert log.startswith("lookup ") and "[redacted phone]" in log  # the line kept, its data not
    for value in [*planted, PHONES[2]]:
        for form in raw_forms(value):
            assert form not in log, f"{form!r} is in the server's log"


def test_libphonenumber_is_loaded_only_for_a_text_that_may_hold_a_phone_number() -> None:
    """Importing it costs 50 to 60 ms, on the story query's critical path: a text without a long run of
    digits cannot hold a phone number (``traces.personal._LONG_NUMBER``), and is read without it."""
    code = (
        "import json, sys\n"
        "from traces.personal import found_in\n"
        "story = found_in('Investigate jane.doe@example.com: whether a £750 refund on ORD-10023 is allowed')\n"
        "before = 'phonenumbers' in sys.modules\n"
        "phone = found_in('ring her on 07700 900123 about ORD-10023')\n"
        "print(json.dumps([[f.kind for f in story], before, [f.kind for f in phone]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [["email"], False, ["phone"]]
