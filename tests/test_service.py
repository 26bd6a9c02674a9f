"""The coordinator service with real processes: it answers as the command does, warm, only to its
fleet's owner, names what is wrong with a request, and cancels the query of an asker that hangs up."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import psutil
import pytest

from sources.catalogue import SOURCES
from sources.processes.fleet import Fleet, Member
from sources.security.fleet_secret import FLEET_SECRET_HEADER
from sources.settings import SourceSettings
from tests.conftest import DefaultPortsHeld, default_ports_held, free_ports, private_settings
from tests.test_cli import research, research_process
from tests.test_fleet import FLEET

pytestmark = pytest.mark.subprocess

QUERY = (
    "Investigate CUST-00042: recent orders, open tickets, and whether a £45 refund on ORD-10031 is allowed"
)
BOUND_S = 20.0  # every wait below ends well within this, or the test fails rather than hangs


@pytest.fixture(scope="module")
def settings(settings: SourceSettings, tmp_path_factory: pytest.TempPathFactory) -> SourceSettings:
    """The session's settings with a data folder of the module's own: its fleet's state, secret and logs."""
    return private_settings(settings, tmp_path_factory.mktemp("service-data"))


@pytest.fixture(scope="module")
def held() -> Iterator[DefaultPortsHeld]:
    """The default ports (8100-8105) held by someone else while the module's fleet runs."""
    with default_ports_held() as holding:
        yield holding


@pytest.fixture(scope="module")
def service(settings: SourceSettings, held: DefaultPortsHeld) -> Iterator[Member]:
    """One fleet for the module (each test leaves it as it found it), on free ports, with the default
    ports held by someone else: what it answers is its own fleet's, and nothing dials them."""
    ports = [f"--port={name}={port}" for name, port in zip(FLEET, free_ports(len(FLEET)), strict=True)]
    up = research(settings, "sources", "up", "--chaos", *ports)
    assert up.returncode == 0, up.stderr
    member = Fleet(settings).members()["coordinator"]
    assert member.alive() and member.module == "coordinator.service"
    yield member
    Fleet(settings).down()
    assert held.dialled_from(settings.data_dir) == []  # never a default port, but the fleet's own


def health(member: Member) -> dict[str, Any]:
    return httpx2.get(f"{member.base}/health", timeout=5).json()


def ask(settings: SourceSettings, *args: str) -> subprocess.CompletedProcess[str]:
    return research(settings, "ask", QUERY, "--transport", "http", "--json", "--seed", "1", *args)


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """What a report says, without what differs between any two runs (its trace, its timings)."""
    return {
        "status": report["status"],
        "answer": report["answer"],
        "findings": report["findings"],
        "gaps": [{key: value for key, value in gap.items() if key != "trace_id"} for gap in report["gaps"]],
        "tasks": [(task["id"], task["state"], task["attempts"]) for task in report["tasks"]],
    }


def test_the_service_answers_as_the_command_does_and_keeps_its_sessions(
    settings: SourceSettings, service: Member
) -> None:
    first = ask(settings)
    opened = health(service)["sessions_opened"]
    second = ask(settings)
    assert first.returncode == second.returncode == 0, first.stderr
    assert "researching in this process" not in first.stderr + second.stderr  # the service answered
    assert set(opened) == set(SOURCES) and health(service)["sessions_opened"] == opened  # warm: reused
    # Each session opened where the fleet has its source (moved off the default ports, held by another).
    moved = Fleet(settings).urls()
    assert health(service)["dialled"] == {source: [url] for source, url in moved.items()}

    killed = research(settings, "chaos", "kill", "coordinator")
    assert killed.returncode == 0, killed.stderr
    in_process = ask(settings)  # no service: this process researches itself, and says so
    assert in_process.returncode == 0 and "researching in this process" in in_process.stderr
    assert _comparable(json.loads(first.stdout)) == _comparable(json.loads(in_process.stdout))
    assert _comparable(json.loads(first.stdout)) == _comparable(json.loads(second.stdout))

    healed = research(settings, "chaos", "heal", "coordinator")  # where it was: asking it works again
    assert healed.returncode == 0, healed.stderr
    again = ask(settings)
    assert again.returncode == 0 and "researching in this process" not in again.stderr
    assert _comparable(json.loads(again.stdout)) == _comparable(json.loads(first.stdout))


def test_every_member_of_the_fleet_listens_on_loopback_only(
    settings: SourceSettings, service: Member
) -> None:
    members = Fleet(settings).members()
    assert set(members) == set(FLEET)
    status = research(settings, "sources", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert {row["name"]: row["health"] for row in json.loads(status.stdout)} == dict.fromkeys(FLEET, "ok")
    for member in members.values():
        listening = [
            connection.laddr
            for connection in psutil.Process(member.pid).net_connections(kind="inet")
            if connection.status == psutil.CONN_LISTEN
        ]
        assert listening == [("127.0.0.1", member.port)], (member.source, listening)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Content-Type": "text/plain"}, 400),  # a cross-site "simple request" from a web page
        ({"Content-Type": "application/x-www-form-urlencoded"}, 400),
        ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403),
        ({"Content-Type": "application/json", "Host": "evil.example"}, 421),  # DNS rebinding
        ({"Content-Type": "application/json"}, 403),  # no secret: another process on the machine
        ({"Content-Type": "application/json", FLEET_SECRET_HEADER: "a-guess-at-the-secret"}, 403),
    ],
    ids=["text-plain", "form", "foreign-origin", "foreign-host", "no-secret", "wrong-secret"],
)
def test_only_the_fleets_owner_can_ask(
    settings: SourceSettings, service: Member, headers: dict[str, str], expected: int
) -> None:
    answer = httpx2.post(
        f"{service.base}/ask", content=json.dumps({"query": QUERY}), headers=headers, timeout=BOUND_S
    )
    assert answer.status_code == expected, answer.text
    assert "CUST-00042" not in answer.text and "findings" not in answer.text  # nothing was researched


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("not json", "JSON object"),
        ('["a list"]', "JSON object"),
        ('{"query": 42}', '"query"'),
        ('{"query": "refund £45 on ORD-10031", "deadline_s": -1}', '"deadline_s"'),
        ('{"query": "refund £45 on ORD-10031", "deadline_s": "soon"}', '"deadline_s"'),
        ('{"query": "refund £45 on ORD-10031", "seed": 1.5}', '"seed"'),
        ('{"query": "what is the weather"}', "names nothing to research"),
        ('{"query": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests deeper than 64 levels"),
    ],
)
def test_a_request_that_cannot_be_served_names_what_is_wrong(
    settings: SourceSettings, service: Member, body: str, named: str
) -> None:
    headers = {"Content-Type": "application/json", FLEET_SECRET_HEADER: Fleet(settings).secret()}
    answer = httpx2.post(f"{service.base}/ask", content=body, headers=headers, timeout=BOUND_S)
    assert answer.status_code == 400 and named in answer.json()["error"], answer.text


def test_a_bad_query_is_the_askers_usage_error(settings: SourceSettings, service: Member) -> None:
    done = research(settings, "ask", "what is the weather", "--transport", "http")
    assert done.returncode == 2 and done.stderr.startswith("error: the query names nothing to research")
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_asker_that_hangs_up_cancels_its_query(settings: SourceSettings, service: Member) -> None:
    assert research(settings, "chaos", "hang", "tickets").returncode == 0
    asking = research_process(settings, "ask", QUERY, "--transport", "http", "--deadline", "60")
    _wait_until(lambda: health(service)["queries_in_flight"] == 1, asking)
    asking.send_signal(signal.SIGINT)
    _, err = asking.communicate(timeout=BOUND_S)
    assert asking.returncode == 130 and "interrupted" in err and "Traceback" not in err
    # Cancelled at once, not when its 60 s deadline comes: the service is free for the next query.
    _wait_until(lambda: health(service)["queries_in_flight"] == 0, None)
    assert research(settings, "chaos", "heal", "tickets").returncode == 0
    again = ask(settings)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "complete"


def _wait_until(condition: Any, process: subprocess.Popen[str] | None) -> None:
    """Poll a condition of processes we started, within BOUND_S."""
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        assert process is None or process.poll() is None, process.communicate()
        time.sleep(0.05)  # a bounded wait for another process, not a back-off


def test_the_service_writes_only_what_a_question_asks_and_what_was_approved(
    settings: SourceSettings, service: Member
) -> None:
    """The service has no one to ask: only the request's `approve` list is approved, and the write
    guard holds for each hostile phrasing (tests/test_writes_asked.py asks the others)."""
    from tests.test_writes_asked import HOSTILE, assert_only_what_was_asked, refunds

    headers = {"Content-Type": "application/json", FLEET_SECRET_HEADER: Fleet(settings).secret()}

    def post(query: str, approve: list[str]) -> dict[str, Any]:
        body = {
            "query": query,
            "deadline_s": 15,
            "grants": ["billing:refund"],
            "approve": approve,
            "output": {"json": True},
        }
        answer = httpx2.post(f"{service.base}/ask", json=body, headers=headers, timeout=BOUND_S)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    for question, asked in HOSTILE:
        before = refunds(settings)
        post(question, ["issue_refund"])
        assert_only_what_was_asked(refunds(settings) - before, asked, question)
    before = refunds(settings)
    unapproved = json.loads(post("Refund £2 on ORD-10008 now", [])["output"])
    assert refunds(settings) == before and unapproved["status"] == "partial"
    assert any(gap["next_step"] == "approve it" for gap in unapproved["gaps"]), unapproved["gaps"]
    bad = httpx2.post(
        f"{service.base}/ask",
        json={"query": QUERY, "approve": ["issue_refund:"]},
        headers=headers,
        timeout=BOUND_S,
    )
    assert bad.status_code == 400 and '"approve"' in bad.json()["error"], bad.text


def _unfinished_post(member: Member, secret: str, framing: str, sent: bytes) -> bytes:
    """POST /ask on a raw socket with ``framing`` and ``sent`` of a far larger body, the socket left
    open: what comes back before the body ends (a service reading it whole would wait forever)."""
    port = int(member.base.rsplit(":", 1)[1])
    head = (
        f"POST /ask HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"{FLEET_SECRET_HEADER}: {secret}\r\n{framing}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as connection:
        connection.sendall(head.encode())
        with contextlib.suppress(OSError):  # the service may answer and close while this is sent
            connection.sendall(sent)
        answer = b""
        try:
            while not _whole(answer) and (received := connection.recv(65536)):
                answer += received  # headers and body may come in separate segments
        except TimeoutError:
            pytest.fail("the service was still reading the body: it reads to the end, not to its bound")
        return answer


def _whole(answer: bytes) -> bool:
    """Whether ``answer`` holds a response's headers and all the body its Content-Length says."""
    head, separator, body = answer.partition(b"\r\n\r\n")
    lengths = [
        line.split(b":", 1)[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")
    ]
    return bool(separator) and bool(lengths) and len(body) >= int(lengths[0])


@pytest.mark.parametrize(
    ("framing", "sent"),
    [
        ("Content-Length: 200000000", b'{"query": "' + b"a" * 100_000),  # 200 MB declared, 100 KB sent
        # No length: 2 MB of chunks, more to come.
        ("Transfer-Encoding: chunked", (b"10000\r\n" + b"a" * 0x10000 + b"\r\n") * 32),
    ],
)
def test_a_body_over_the_bound_is_refused_before_it_is_read_whole(
    settings: SourceSettings, service: Member, framing: str, sent: bytes
) -> None:
    answer = _unfinished_post(service, Fleet(settings).secret(), framing, sent)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert "the body is larger than" in error and "64,000 characters" in error, error
    assert health(service)["queries_in_flight"] == 0  # and the service still answers
