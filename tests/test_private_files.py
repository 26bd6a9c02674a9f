"""The data folder and everything in it only its owner may open, whether or not it was there before."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.registry import Registry
from sources.processes.fleet import Fleet
from sources.settings import SourceSettings
from sources.store import Store
from sources.world import ensure_world, world_path
from tests.conftest import PROJECT_ROOT
from traces.files import file_exporter
from traces.private_files import NotYoursError, open_private_file, private_folder

ANOTHER_USER = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user takes root")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def modes_under(folder: Path) -> dict[str, str]:
    """Every folder's and file's mode under ``folder`` (in octal), the folder's own as ".", by relative name."""
    found = {".": f"{mode_of(folder):04o}"}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = f"{mode_of(path):04o}"
    return found


def all_private(modes: dict[str, str], folder: Path) -> dict[str, str]:
    """What ``modes`` would be were every folder 0700 and every file 0600."""
    return {name: "0700" if (folder / name).is_dir() else "0600" for name in modes}


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, which lets a file created with the default mode be read by anyone."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def made_before(settings: SourceSettings, data_dir: Path) -> Path:
    """A data folder as an earlier version left one in a folder made 0755 beforehand: its world 0755,
    the databases and a trace 0644; the world copied from the session's (generating one is slower)."""
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    world = world_path(data_dir, settings.seed)
    shutil.copytree(world_path(settings.data_dir, settings.seed), world)
    world.chmod(0o755)
    for path in world.iterdir():
        path.chmod(0o644)
    traces = data_dir / "traces"
    traces.mkdir(mode=0o700)
    (traces / "research-coordinator-1.jsonl").write_text("{}\n")
    (traces / "research-coordinator-1.jsonl").chmod(0o644)
    assert mode_of(world / "customers.db") == 0o644 and mode_of(data_dir) == 0o755
    return data_dir


# --- a folder of this user's ---------------------------------------------------------------------


def test_a_data_folder_made_0755_before_is_made_private_with_all_in_it(
    settings: SourceSettings, tmp_path: Path
) -> None:
    data_dir = made_before(settings, tmp_path / "data")
    world = ensure_world(data_dir, settings.seed)  # what every source does as it starts
    assert world == world_path(data_dir, settings.seed)
    modes = modes_under(data_dir)
    assert {f"{world.name}/customers.db", "traces/research-coordinator-1.jsonl"} <= set(modes)
    assert modes == all_private(modes, data_dir)


def test_a_world_made_before_in_a_private_data_folder_is_made_private(
    settings: SourceSettings, tmp_path: Path
) -> None:
    """The usual state an earlier version left: the data folder 0700, its world 0755 with 0644 files."""
    data_dir = made_before(settings, tmp_path / "data")
    data_dir.chmod(0o700)
    world = ensure_world(data_dir, settings.seed)
    modes = modes_under(world)
    assert modes == all_private(modes, world)


def test_a_new_world_is_private_from_the_start(tmp_path: Path, umask_022: None) -> None:
    world = ensure_world(tmp_path / "data", 5)
    modes = modes_under(tmp_path / "data")
    assert {world.name, f"{world.name}/billing.db", f"{world.name}/fingerprint"} <= set(modes)
    assert modes == all_private(modes, tmp_path / "data")
    # SQLite's journal takes its database's mode: a write to billing leaves nothing others can read.
    with Store(world / "billing.db").transaction() as connection:
        connection.execute("CREATE TABLE probe (x)")  # changes a page: the journal is written first
        journals = sorted(world.glob("billing.db-*"))
        assert journals and all(mode_of(journal) == 0o600 for journal in journals), journals


def test_a_file_written_there_is_0600_even_if_it_was_there_wider(tmp_path: Path, umask_022: None) -> None:
    appended, written = tmp_path / "appended.log", tmp_path / "written.log"
    for path in (appended, written):
        path.write_text("before\n")
        path.chmod(0o644)
    with open_private_file(appended, "a") as log:
        log.write("after\n")
    with open_private_file(written, "w") as log:
        log.write("after\n")
    with open_private_file(tmp_path / "new.log", "a") as log:
        log.write("new\n")
    assert appended.read_text() == "before\nafter\n" and written.read_text() == "after\n"
    assert {mode_of(path) for path in (appended, written, tmp_path / "new.log")} == {0o600}


def test_traces_are_private_in_a_traces_folder_that_was_there_wider(tmp_path: Path, umask_022: None) -> None:
    traces = tmp_path / "traces"
    traces.mkdir(mode=0o755)
    traces.chmod(0o755)
    mine = traces / f"research-coordinator-{os.getpid()}.jsonl"  # an earlier process of the same id
    older = traces / "research-source-orders-1.jsonl"
    for path in (mine, older):
        path.write_text("{}\n")
        path.chmod(0o644)
    file_exporter(traces, "research-coordinator").shutdown()
    modes = modes_under(traces)
    assert modes == all_private(modes, traces) and len(modes) == 3


def test_a_folder_that_was_there_is_made_0700_but_not_what_is_in_it_unless_asked(tmp_path: Path) -> None:
    """A folder someone names (a batch's --out) is made 0700; only a data folder's files are changed."""
    folder = tmp_path / "out"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    (folder / "notes.txt").write_text("mine\n")
    (folder / "notes.txt").chmod(0o644)
    assert private_folder(folder) == folder
    assert mode_of(folder) == 0o700 and mode_of(folder / "notes.txt") == 0o644


# --- a folder of someone else's ------------------------------------------------------------------


def check_refusal(refused: pytest.ExceptionInfo[NotYoursError], folder: Path, owner: str) -> None:
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{folder} belongs to ") and owner in message
    assert "Use a folder of your own" in message and "sudo chown -R " in message
    assert message.endswith(f" {folder}")  # the fix names the folder
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, OSError)  # one line either way


def test_a_folder_another_user_owns_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root: this user's folder, seen by a process of another user id."""
    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    owner = os.stat(folder).st_uid
    monkeypatch.setattr(os, "geteuid", lambda: owner + 1)
    with pytest.raises(NotYoursError) as refused:
        private_folder(folder, contents=True)
    check_refusal(refused, folder, f"uid {owner}")
    assert mode_of(folder) == 0o755  # left as it is


@pytest.fixture
def foreign_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    os.chown(folder, ANOTHER_USER, ANOTHER_USER)
    return folder


@as_root
def test_a_data_folder_another_user_owns_is_refused_before_a_world_is_written(foreign_folder: Path) -> None:
    with pytest.raises(NotYoursError) as refused:
        ensure_world(foreign_folder, 5)
    check_refusal(refused, foreign_folder, f"uid {ANOTHER_USER}")
    assert list(foreign_folder.iterdir()) == [] and mode_of(foreign_folder) == 0o755


@as_root
@pytest.mark.subprocess
def test_research_refuses_another_users_data_folder_in_one_line(foreign_folder: Path) -> None:
    """As `research ask` and `research task` do (they share the check); `sources call` starts quickest."""
    environment = {**os.environ, "RESEARCH_DATA_DIR": str(foreign_folder)}
    call = ["sources", "call", "customers", "customer_lookup", '{"identifier": "CUST-00042"}']
    done = subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *call],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"error: {foreign_folder} belongs to ")
    assert line.endswith(f"chown -R root {foreign_folder}")
    assert list(foreign_folder.iterdir()) == []  # nothing written there: no traces, no key, no world


# --- what the commands write ---------------------------------------------------------------------


def research(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A `research` command in a process of its own under the usual umask (022), on ``data_dir``."""
    ours = {name: value for name, value in os.environ.items() if not name.startswith("RESEARCH_")}
    environment = {**ours, "RESEARCH_DATA_DIR": str(data_dir), "RESEARCH_KB_WARMUP_MS": "0"}
    return subprocess.run(
        [sys.executable, "-c", "from coordinator.cli import app; app()", *args],
        env=environment, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=180, umask=0o022,
    )  # fmt: skip


@pytest.fixture
def fresh_data_dir(tmp_path: Path) -> Iterator[Path]:
    """A data folder no command has used yet; the fleet a batch started there stopped after."""
    data_dir = tmp_path / "data"
    yield data_dir
    Fleet(SourceSettings(data_dir=data_dir)).down()


@pytest.mark.subprocess
def test_everything_the_story_a_batch_and_a_replay_write_is_private(fresh_data_dir: Path) -> None:
    """Every file 0600 and every folder 0700 in the data folder, with no exception: the world, the
    kb's index marker, the keys, the traces and recordings, the fleet's state, secret and logs, and a
    batch's folder (put in the data folder here, so that the walk covers it too)."""
    story = "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
    asked = research(fresh_data_dir, "ask", story, "--json")
    assert asked.returncode == 3, asked.stderr  # partial: the £750 refund is above the limit
    questions = fresh_data_dir.parent / "questions.jsonl"
    questions.write_text('{"id": "q1", "query": "What is our policy on refunds?"}\n')
    batch = research(
        fresh_data_dir, "batch", str(questions), "--out", str(fresh_data_dir / "runs" / "tonight")
    )
    assert batch.returncode in (0, 3), batch.stderr
    replayed = research(fresh_data_dir, "replay", "latest")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    modes = modes_under(fresh_data_dir)
    world = world_path(fresh_data_dir, SourceSettings(data_dir=fresh_data_dir).seed).name
    expected = {  # what each command writes is there: the walk saw their files
        f"{world}/kb-index.built", f"{world}/billing.db", "signing-ed25519.key", "fleet.secret",
        "runs/tonight/summary.json", "runs/tonight/reports/q1.json",
    }  # fmt: skip
    assert expected <= set(modes)
    assert any(name.startswith("traces/recordings/") for name in modes)
    assert any(name.startswith("fleet-logs/") for name in modes)
    assert modes == all_private(modes, fresh_data_dir)


def test_a_saved_registry_is_private(tmp_path: Path, umask_022: None) -> None:
    """research.toml, as `sources add` writes it: an entry's env may hold a token."""
    saved = Registry(None).save(tmp_path / "research.toml")
    assert mode_of(saved) == 0o600
