"""The sources registry, end to end without a process: the file, the reader's paths and kinds, the planner.

- ``research.toml``: generated entries survive a save and a load; every kind of bad entry is left out
  with one line that names it while the others load; a file that is not TOML names the file and line.
- Reading: paths written the ways people write them (``./docs``, ``../a/b.md``, ``/srv/x/y.txt``,
  ``~/notes``, ``docs/refund-policy.md``) are read whole and made absolute; sentences with slashes that
  are no paths (``and/or``, dates, URLs, amounts) read none; kinds a source defines are found.
- Planning over a registered source built from ``ListedTool``s written here: what is plannable and why
  the rest is not; files and folders planned with the demo tasks; nothing a question names is dropped.

The expected values are written out here (an absolute path is ``os.path.realpath`` of the text as
written, against a working folder and a home this file sets), independently of the code under test.
"""

from __future__ import annotations

import operator
import os
import re
import shlex
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from coordinator.planning.plan import Plan, PlanError, PlannedTask
from coordinator.planning.planner import plan_query
from coordinator.planning.reading import read_query
from coordinator.planning.tools import Catalog, demo_catalog, with_registered
from coordinator.registered_tools import ListedTool
from coordinator.registry import BUILT_IN_KINDS, Registry, RegistryError, SourceEntry
from sources.catalogue import SOURCES

# Seeded (the same examples every run) and no example database: the file runs in well under 5 s.
SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HEAVY = settings(SETTINGS, max_examples=25)  # examples that each write a file or plan a query
# A file of many entries is shown as found, not shrunk: it reads well as it is, and shrinking one takes long.
UNSHRUNK = settings(HEAVY, phases=[Phase.explicit, Phase.generate])
CATEGORIES = ("transient", "validation", "business", "permission")


def one_line(message: str) -> bool:
    return "\n" not in message and "\r" not in message


# --- 1. the registry file ----------------------------------------------------------------------------

LOWER = string.ascii_lowercase


def lower_words(rest: str, most: int, least: int = 0) -> st.SearchStrategy[str]:
    """A lower-case letter, then ``least`` to ``most`` characters of ``rest`` (cheaper than a regex)."""
    return st.builds(operator.add, st.sampled_from(LOWER), st.text(rest, min_size=least, max_size=most))


names = lower_words(LOWER + string.digits + "_-", 31).filter(lambda name: name not in SOURCES)
own_kinds = lower_words(LOWER + string.digits + "_", 31).filter(lambda kind: kind not in BUILT_IN_KINDS)
patterns = st.sampled_from([r"ENOENT", r"\bEACCES\b", r"(?i)not found", r"rate limit.*", r"\d{3}"]) | st.text(
    min_size=1, max_size=12
).map(re.escape)
urls = st.builds(
    "http{}://{}:{}/{}".format,
    st.sampled_from(["", "s"]),
    st.sampled_from(["127.0.0.1", "localhost", "mcp.example.org"]),
    st.integers(1, 65535),
    st.text(LOWER, max_size=8),
)


# What a process can be given: any text but NUL (refused with a clear error, tested below).
PASSABLE = st.characters(blacklist_characters="\x00")


@st.composite
def entry_tables(draw: st.DrawFn, name: str | None = None) -> dict[str, Any]:
    """One valid ``[[source]]`` table, as a file would hold it (strings, lists, tables)."""
    table: dict[str, Any] = {"name": name or draw(names)}
    if draw(st.booleans()):
        table["command"] = draw(st.lists(st.text(PASSABLE, min_size=1, max_size=12), min_size=1, max_size=4))
    else:
        table["url"] = draw(urls)
    optional = {
        "cwd": st.text(PASSABLE, min_size=1, max_size=20),
        "env": st.dictionaries(
            st.text(PASSABLE, min_size=1, max_size=8), st.text(PASSABLE, max_size=12), max_size=3
        ),
        "timeout": st.floats(0, 600, exclude_min=True, allow_nan=False),
        "scopes": st.lists(st.text(min_size=1, max_size=12), max_size=3),
    }
    for key, values in optional.items():
        if draw(st.booleans()):
            table[key] = draw(values)
    kinds = draw(st.dictionaries(own_kinds, patterns, max_size=2))
    if kinds:
        table["entities"] = kinds
    tool_names = st.text(min_size=1, max_size=12)
    arguments = st.dictionaries(
        st.text(min_size=1, max_size=8), st.sampled_from(sorted(BUILT_IN_KINDS | set(kinds))), max_size=2
    )
    plan = draw(st.dictionaries(tool_names, arguments, max_size=2))
    if plan:
        table["plan"] = plan
    errors = draw(st.dictionaries(patterns, st.sampled_from(CATEGORIES), max_size=3))
    if errors:
        table["errors"] = errors
    empty = draw(st.lists(patterns, max_size=2))
    if empty:
        table["empty"] = empty
    return table


@given(st.lists(names, min_size=1, max_size=4, unique=True).flatmap(
    lambda chosen: st.tuples(*(entry_tables(name) for name in chosen))
))  # fmt: skip
@HEAVY
def test_added_entries_saved_then_loaded_are_the_same_entries(
    tmp_path: Path, tables: tuple[dict, ...]
) -> None:
    path = tmp_path / "round-trip.toml"
    registry = Registry(path)
    for table in tables:
        registry = registry.added(SourceEntry.model_validate(table))
    assert registry.save() == path
    loaded = Registry.load(path)
    assert loaded.problems == {}
    assert list(loaded.entries) == [table["name"] for table in tables]
    assert loaded.entries == registry.entries
    assert set(loaded.sources()) == {*SOURCES, *loaded.entries}


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=5))
@SETTINGS
def test_a_command_written_as_one_string_is_split_as_a_shell_would(words: list[str]) -> None:
    assert SourceEntry(name="docs", command=shlex.join(words)).command == tuple(words)


def write(path: Path, *bodies: str) -> Path:
    path.write_text("".join(f"[[source]]\n{body}\n" for body in bodies), encoding="utf-8")
    return path


def good(name: str) -> str:
    return (
        f'name = "{name}"\ncommand = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "./{name}"]\n'
    )


# Each bad entry of the issue (NAME is its name), and what its error says.
BAD_ENTRIES = {
    "neither command nor url": ('name = "NAME"\ncwd = "/srv"\n', "exactly one of command"),
    "both command and url": (
        'name = "NAME"\ncommand = "srv"\nurl = "http://127.0.0.1:9000/mcp"\n',
        "exactly one of command",
    ),
    "url not http": ('name = "NAME"\nurl = "ftp://example.org/mcp"\n', "http(s) URL"),
    "url with no scheme": ('name = "NAME"\nurl = "example.org/mcp"\n', "http(s) URL"),
    "bad regex under errors": (
        'name = "NAME"\ncommand = "srv"\n[source.errors]\n"(unclosed" = "validation"\n',
        "not a regular expression",
    ),
    "bad regex under entities": (
        'name = "NAME"\ncommand = "srv"\n[source.entities]\ntimezone = "[A-Z"\n',
        "not a regular expression",
    ),
    "unknown kind under plan": (
        'name = "NAME"\ncommand = "srv"\n[source.plan]\nread_text_file = { path = "galaxy" }\n',
        "unknown kind 'galaxy'",
    ),
    "category not one of the four": (
        'name = "NAME"\ncommand = "srv"\n[source.errors]\nENOENT = "fatal"\n',
        "'transient', 'validation', 'business' or 'permission'",
    ),
    "unknown setting": ('name = "NAME"\ncommand = "srv"\ncolour = "red"\n', "colour is not a setting"),
}


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_a_bad_entry_is_left_out_with_one_line_naming_it_and_the_others_load(
    tmp_path: Path, case: str
) -> None:
    body, says = BAD_ENTRIES[case]
    path = write(tmp_path / "research.toml", good("before"), body.replace("NAME", "broken"), good("after"))
    registry = Registry.load(path)
    assert list(registry.entries) == ["before", "after"]
    assert list(registry.problems) == ["broken"]
    message = registry.problems["broken"]
    assert one_line(message), message
    assert "source 'broken'" in message
    assert says in message


@pytest.mark.parametrize("demo", SOURCES)
def test_an_entry_named_as_a_demo_source_is_left_out(tmp_path: Path, demo: str) -> None:
    path = write(tmp_path / "research.toml", good("mine"), f'name = "{demo}"\ncommand = "srv"\n')
    registry = Registry.load(path)
    assert list(registry.entries) == ["mine"]
    message = registry.problems[demo]
    assert one_line(message)
    assert f"source {demo!r}" in message
    assert "demo source" in message
    assert registry.get(demo).demo  # the demo source itself is untouched


def test_of_two_entries_with_one_name_the_first_is_kept_and_the_second_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path / "research.toml",
        good("docs"),
        good("other"),
        'name = "docs"\nurl = "http://127.0.0.1:9000/mcp"\n',
    )
    registry = Registry.load(path)
    assert list(registry.entries) == ["docs", "other"]
    assert registry.entries["docs"].url is None  # the first, with its command
    [(key, message)] = registry.problems.items()
    assert "docs" in key
    assert one_line(message)
    assert "source 'docs'" in message
    assert "#3" in message


@st.composite
def mixed_files(draw: st.DrawFn) -> list[tuple[str, str, bool]]:
    """Entries (name, body, whether it is valid alone) in any order: good ones, each bad kind of the
    issue, an entry named as a demo source, and second entries of a name already used."""
    chosen = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    bodies = [(name, good(name), True) for name in chosen]
    for name in draw(st.lists(names.filter(lambda name: name not in chosen), max_size=4, unique=True)):
        bodies.append(
            (name, BAD_ENTRIES[draw(st.sampled_from(sorted(BAD_ENTRIES)))][0].replace("NAME", name), False)
        )
    for demo in draw(st.lists(st.sampled_from(SOURCES), max_size=2, unique=True)):
        bodies.append((demo, f'name = "{demo}"\ncommand = "srv"\n', False))
    for name in draw(st.lists(st.sampled_from(chosen), max_size=2)):
        bodies.append((name, f'name = "{name}"\nurl = "http://127.0.0.1:9000/mcp"\n', True))
    return draw(st.permutations(bodies))


@given(mixed_files())
@UNSHRUNK
def test_in_any_mix_every_good_entry_loads_and_every_bad_one_is_named(
    tmp_path: Path, bodies: list[tuple[str, str, bool]]
) -> None:
    registry = Registry.load(write(tmp_path / "research.toml", *(body for _, body, _ in bodies)))
    first = {}
    for name, _, valid in bodies:
        first.setdefault(name, valid)  # of two entries with one name, the first is the one kept
    assert list(registry.entries) == [name for name, valid in first.items() if valid]
    assert len(registry.problems) == len(bodies) - len(registry.entries)
    for message in registry.problems.values():
        assert one_line(message), message
    named = sorted(re.match(r"source '([^']*)'", message)[1] for message in registry.problems.values())
    expected = [name for name, _, _ in bodies]
    for name in registry.entries:
        expected.remove(name)
    assert named == sorted(expected)


# Each breaks the line it is on (an error only found at the end of the document has no line to name).
NOT_TOML = [
    "name = = 'x'",
    "[[source]",
    'name = "open',
    "= 'x'",
    "name 'x'",
    "[[source]]\nname = 'a'\nname = 'b'",
]


@given(st.integers(0, 12), st.sampled_from(NOT_TOML))
@SETTINGS
def test_a_file_that_is_not_toml_is_one_error_naming_the_file_and_the_line(
    tmp_path: Path, comments: int, broken: str
) -> None:
    path = tmp_path / "research.toml"
    path.write_text("# my sources\n" * comments + broken + "\n", encoding="utf-8")
    with pytest.raises(RegistryError) as raised:
        Registry.load(path)
    message = str(raised.value)
    assert one_line(message)
    assert str(path) in message
    assert f"line {comments + broken.count(chr(10)) + 1}" in message


def test_toml_that_is_not_source_tables_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "research.toml"
    path.write_text('[server]\nname = "docs"\n', encoding="utf-8")
    with pytest.raises(RegistryError, match="entries are written") as raised:
        Registry.load(path)
    assert str(path) in str(raised.value)


@pytest.mark.parametrize("demo", SOURCES)
def test_a_demo_source_cannot_be_removed(tmp_path: Path, demo: str) -> None:
    registry = Registry.load(write(tmp_path / "research.toml", good("docs")))
    with pytest.raises(RegistryError, match="demo source") as raised:
        registry.removed(demo)
    assert one_line(str(raised.value))


def test_removing_an_unknown_name_says_which_sources_there_are(tmp_path: Path) -> None:
    registry = Registry.load(write(tmp_path / "research.toml", good("docs")))
    with pytest.raises(RegistryError, match="no source is named 'nowhere'") as raised:
        registry.removed("nowhere")
    assert one_line(str(raised.value))
    assert "docs" in str(raised.value)


def test_removing_a_registered_source_keeps_the_others_and_the_original(tmp_path: Path) -> None:
    path = write(tmp_path / "research.toml", good("docs"), good("notes"))
    registry = Registry.load(path)
    without = registry.removed("docs")
    assert list(without.entries) == ["notes"]
    assert list(registry.entries) == ["docs", "notes"]  # a new registry; this one is unchanged
    without.save()
    assert list(Registry.load(path).entries) == ["notes"]


def test_adding_an_existing_name_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    registry = Registry.load(write(tmp_path / "research.toml", good("docs")))
    again = SourceEntry(name="docs", url="http://127.0.0.1:9000/mcp")
    with pytest.raises(RegistryError, match="exists already") as raised:
        registry.added(again)
    assert one_line(str(raised.value))
    assert registry.entries["docs"].url is None


# --- 2. reading paths and kinds of a source's own ----------------------------------------------------


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder and a home of this test's own, so that where a path points is known."""
    cwd = (tmp_path / "work" / "project").resolve()
    home = (tmp_path / "home" / "me").resolve()
    cwd.mkdir(parents=True)
    home.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    return cwd


def absolute(written: str) -> str:
    return os.path.realpath(os.path.join(os.getcwd(), os.path.expanduser(written)))


# Ordinary names of files and folders: none of them alone is read as anything (an id, a date, a name).
FOLDER_NAMES = ["docs", "notes", "reports", "refund-policy", "archive", "team_a", "drafts", "v1.2", "shared"]
EXTENSIONS = ["md", "txt", "json", "csv", "pdf", "toml", "log", "py"]
segments = st.sampled_from(FOLDER_NAMES) | st.builds(
    "{}{}{}".format,
    st.text(LOWER, min_size=3, max_size=8),
    st.sampled_from(["", "-", "_"]),
    st.text(LOWER + string.digits, max_size=5),
).map(lambda word: word.rstrip("-_")).filter(lambda word: not read_query(f"see {word} please").mentions)
plain_segments = segments.filter(lambda word: "." not in word)  # a bare relative path starts with one


@st.composite
def written_paths(draw: st.DrawFn, form: str | None = None, is_file: bool | None = None) -> str:
    """A path as people write one: from the root, home or here, or folders and a file with an extension."""
    form = draw(st.sampled_from(["./", "../", "/", "~/", ""])) if form is None else form
    is_file = (form == "" or draw(st.booleans())) if is_file is None else is_file
    folders = draw(st.lists(segments, min_size=0 if form else 1, max_size=3))
    if form == "":
        folders[0] = draw(plain_segments)
    if is_file:
        name = draw(plain_segments)
        return form + "/".join([*folders, f"{name}.{draw(st.sampled_from(EXTENSIONS))}"])
    folders = folders or [draw(segments)]
    return form + "/".join(folders) + draw(st.sampled_from(["", "/"]))


LEADS = ["read", "What does", "Summarise", "Is a refund allowed under", "see", "compare with", "look in"]
AFTER = [".", ",", "?", ")", "!", ";", ":", "", "...", "'s contents"]


@st.composite
def sentences_with(draw: st.DrawFn, path: str) -> str:
    lead = draw(st.sampled_from(LEADS))
    after = draw(st.sampled_from(AFTER))
    quote = draw(st.sampled_from(["", '"', "'", "`"]))
    opened = "(" if after == ")" else ""
    tail = draw(st.sampled_from(["", " thanks", " and the rest"]))
    return f"{lead} {opened}{quote}{path}{quote}{after}{tail}"


@given(st.data())
@SETTINGS
def test_a_path_in_a_sentence_is_read_as_exactly_that_path_made_absolute(
    here: Path, data: st.DataObject
) -> None:
    written = data.draw(written_paths(), label="path")
    sentence = data.draw(sentences_with(written), label="sentence")
    [mention] = read_query(sentence, paths=True).of("path")
    assert mention.text == written
    assert mention.value == absolute(written)
    assert os.path.isabs(mention.value)


@pytest.mark.parametrize(
    ("sentence", "written"),
    [
        ("What does ./docs say about refunds?", "./docs"),
        ("Compare ../a/b.md, then answer", "../a/b.md"),
        ("Is it in /srv/x/y.txt?", "/srv/x/y.txt"),
        ("anything in (~/notes)", "~/notes"),
        ("Is a refund allowed under docs/refund-policy.md.", "docs/refund-policy.md"),
    ],
)
def test_the_paths_of_the_issue_are_read(here: Path, sentence: str, written: str) -> None:
    [mention] = read_query(sentence, paths=True).of("path")
    assert (mention.text, mention.value) == (written, absolute(written))


@given(st.lists(written_paths(), min_size=2, max_size=4, unique=True), st.sampled_from([", ", " and ", "; "]))
@SETTINGS
def test_several_paths_in_one_sentence_are_each_read(here: Path, paths: list[str], joiner: str) -> None:
    reading = read_query(f"Compare {joiner.join(paths)}.", paths=True)
    assert [mention.text for mention in reading.of("path")] == paths


@pytest.mark.parametrize(
    "written",
    [
        "/var/log/2026-10-01.log",
        "./orders/ORD-10031.json",
        "/srv/cust-42/notes.txt",
        "docs/kb-refunds.md",
        "./notes/yesterday.md",
        "./exports/sku-4417-blk.csv",
    ],
)
def test_a_path_whose_names_look_like_an_id_or_a_date_is_read_whole(here: Path, written: str) -> None:
    reading = read_query(f"What does {written} say?", paths=True)
    assert [(m.text, m.value) for m in reading.of("path")] == [(written, absolute(written))]


@pytest.mark.parametrize("written", ["docs/archive.tar.gz", "notes/minutes.v2.md", "a/b/c.d.txt"])
def test_a_file_name_with_two_dots_is_read_whole(here: Path, written: str) -> None:
    reading = read_query(f"read {written}.", paths=True)
    assert [(m.text, m.value) for m in reading.of("path")] == [(written, absolute(written))]


@pytest.mark.parametrize("written", ["~/.bashrc", "./.env", "/srv/x/.hidden", "~/.config/app/x.toml"])
def test_a_hidden_file_is_read_whole(here: Path, written: str) -> None:
    reading = read_query(f"read {written} please", paths=True)
    assert [(m.text, m.value) for m in reading.of("path")] == [(written, absolute(written))]


# Slashes that are no paths, as support questions hold them.
words = st.text(LOWER, min_size=2, max_size=8)
no_paths = st.one_of(
    st.sampled_from(["and/or", "either/or", "w/o", "n/a", "yes/no", "24/7", "TCP/IP", "A/B testing", "I/O"]),
    st.builds("on {}/{}/{}".format, st.integers(1, 28), st.integers(1, 12), st.integers(2020, 2026)),
    st.builds(
        "since {}-{:02d}-{:02d}".format, st.integers(2020, 2026), st.integers(1, 12), st.integers(1, 28)
    ),
    st.builds(
        "https://{}.com/{}/{}".format,
        words,
        words,
        words | st.builds("{}.md".format, words) | words.map("{}?q=1".format),
    ),
    st.builds("http://localhost:{}/{}/{}.md".format, st.integers(1000, 9999), words, words),
    st.builds("{}.{}+{}@example.com".format, words, words, words),
    st.builds("£{}.{:02d}".format, st.integers(1, 9999), st.integers(0, 99)),
    st.builds("{} GBP".format, st.integers(1, 9999)),
    st.builds("ORD-{}".format, st.integers(10000, 99999)),
    st.builds("order #{}".format, st.integers(10000, 99999)),
    st.builds("CUST-{:05d}".format, st.integers(1, 99999)),
)


@given(st.lists(no_paths, min_size=1, max_size=4), st.sampled_from(["?", ".", ")", ","]))
@SETTINGS
def test_a_sentence_without_a_path_reads_no_path(fragments: list[str], end: str) -> None:
    sentence = "Is the refund for " + " and ".join(fragments) + end
    assert read_query(sentence, paths=True).of("path") == []


@pytest.mark.parametrize(
    "sentence",
    [
        "Is the £45.00/month plan refundable?",
        "a charge of 45 GBP/year on ORD-10031",
        "What is the ORD-10031/refund status?",
        "CUST-00042/orders since last week",
        "orders since 2026-10-01/today",
        "see KB-REFUNDS/latest",
    ],
)
def test_an_id_amount_or_date_before_a_slash_makes_no_root_path(sentence: str) -> None:
    assert [mention.text for mention in read_query(sentence, paths=True).of("path")] == []


@given(st.data())
@SETTINGS
def test_without_paths_no_path_is_read(here: Path, data: st.DataObject) -> None:
    written = data.draw(written_paths(), label="path")
    reading = read_query(data.draw(sentences_with(written), label="sentence"))
    assert reading.of("path") == []
    assert not demo_catalog().reads_paths


TIMEZONE = r"\b(?:Africa|America|Asia|Australia|Europe|Pacific)(?:/[A-Z][A-Za-z_]+)+\b"
TIMEZONES = [
    "Europe/London",
    "America/New_York",
    "Asia/Kolkata",
    "Australia/Sydney",
    "America/Argentina/Buenos_Aires",
    "Pacific/Auckland",
    "Europe/Paris",
]
timezones = st.lists(st.sampled_from(TIMEZONES), min_size=1, max_size=4)


@given(timezones, st.booleans())
@SETTINGS
def test_a_kind_a_source_defines_is_found_and_is_no_path(here: Path, named: list[str], paths: bool) -> None:
    reading = read_query(f"What time is it in {', '.join(named)}?", {"timezone": TIMEZONE}, paths=paths)
    assert reading.values("timezone") == list(dict.fromkeys(named))
    assert reading.of("path") == []


# --- 3. planning over a registered source --------------------------------------------------------------


def schema(*properties: str, required: tuple[str, ...] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in properties},
        "required": list(properties if required is None else required),
    }


FILESYSTEM = [
    ListedTool("read_text_file", schema("path"), read_only=True),
    ListedTool("list_directory", schema("path"), read_only=True),
    ListedTool("write_file", schema("path", "content"), read_only=False),
    ListedTool("broken", {"type": "object", "properties": {"path": {"type": 5}}}, read_only=True),
    ListedTool("mystery", schema("thing"), read_only=True),
    ListedTool("list_allowed_directories", schema(), read_only=True),
    ListedTool("move_file", schema("source", "destination"), read_only=True),
]
HINTS = {
    "read_text_file": {"path": "file"},
    "list_directory": {"path": "folder"},
    "move_file": {"from": "path"},  # an argument it does not take
}


def files_catalog(plan: dict[str, dict[str, str]] | None = None) -> Catalog:
    entry = SourceEntry(
        name="files", command=("npx", "server-filesystem", "."), plan=HINTS if plan is None else plan
    )
    return with_registered(demo_catalog(), "files", FILESYSTEM, entry)


def test_with_registered_marks_what_is_plannable_and_says_why_the_rest_is_not() -> None:
    catalog = files_catalog()
    assert catalog.registered == {"files.read_text_file", "files.list_directory"}
    why = catalog.not_usable
    assert why["files.write_file"].startswith("not read-only")
    assert why["files.broken"].startswith("its input schema is invalid")
    assert why["files.mystery"].startswith("nothing says what 'thing' takes")
    assert why["files.list_allowed_directories"] == "takes nothing a question names"
    assert "plan names argument 'from'" in why["files.move_file"]
    assert all(one_line(reason) for reason in why.values())
    assert catalog.offered["files"] == {tool.name for tool in FILESYSTEM}
    assert catalog.reads_paths
    assert "files: list_directory(path), read_text_file(path)" in catalog.describe()
    # The demo sources' tools are all still there, and the cached demo catalog is untouched.
    assert demo_catalog().tools.items() <= catalog.tools.items()
    assert "files" not in demo_catalog().offered
    assert not demo_catalog().registered


@pytest.mark.parametrize(
    "input_schema",
    [
        {"type": "object", "properties": {"path": True}, "required": ["path"]},
        {
            "type": "object",
            "properties": {"path": {"anyOf": [True, {"type": "string"}]}},
            "required": ["path"],
        },
        {"type": "object", "properties": {"path": {"$ref": "#/$defs/P"}}, "$defs": {"P": True}},
    ],
)
def test_a_valid_schema_with_boolean_subschemas_is_planned_or_refused_never_a_crash(
    input_schema: dict,
) -> None:
    entry = SourceEntry(name="files", command=("srv",), plan={"read_text_file": {"path": "file"}})
    catalog = with_registered(
        demo_catalog(), "files", [ListedTool("read_text_file", input_schema, True)], entry
    )
    assert ("files.read_text_file" in catalog.registered) != ("files.read_text_file" in catalog.not_usable)


def test_a_write_tool_the_entry_names_under_plan_is_plannable() -> None:
    catalog = files_catalog({"write_file": {"path": "file", "content": "text"}})
    assert "files.write_file" in catalog.registered
    assert "files.write_file" not in catalog.not_usable


REFUND = "Is a refund of £45 on ORD-10031 allowed"


def tasks_of(plan: Plan, tool: str) -> list[PlannedTask]:
    return [task for task in plan.order() if task.tool == tool]


@given(
    st.lists(written_paths(form="./", is_file=True), min_size=1, max_size=3, unique=True),
    st.lists(
        written_paths(form="./", is_file=False)
        .map(lambda p: p.rstrip("/"))
        .filter(lambda p: "." not in p.rsplit("/", 1)[-1]),  # "v1.2" that is not here reads as a file
        min_size=1,
        max_size=3,
        unique=True,
    ),
)
@HEAVY
def test_files_are_read_and_folders_listed_alongside_the_demo_tasks(
    here: Path, files: list[str], folders: list[str]
) -> None:
    plan = plan_query(
        f"{REFUND} under {', '.join(files)}? See also {' and '.join(folders)}.", files_catalog()
    )
    [refund] = tasks_of(plan, "refund_eligibility")
    assert refund.arguments == {"order_id": "ORD-10031", "amount": 45.0}
    read = [task.arguments for task in tasks_of(plan, "read_text_file")]
    listed = [task.arguments for task in tasks_of(plan, "list_directory")]
    assert sorted(read, key=str) == sorted(({"path": absolute(f)} for f in set(files)), key=str)
    assert sorted(listed, key=str) == sorted(({"path": absolute(f)} for f in set(folders)), key=str)
    assert all(
        task.source == "files" for task in tasks_of(plan, "read_text_file") + tasks_of(plan, "list_directory")
    )
    assert tasks_of(plan, "write_file") == []
    assert not any("/" in item.what for item in plan.unplanned)


def test_a_folder_is_a_folder_here_whatever_its_name_and_a_file_without_extension_a_file(here: Path) -> None:
    (here / "v1.2").mkdir()
    (here / "Makefile").write_text("all:\n", encoding="utf-8")
    plan = plan_query("What is in ./v1.2 and ./Makefile?", files_catalog())
    assert [task.arguments["path"] for task in tasks_of(plan, "list_directory")] == [str(here / "v1.2")]
    assert [task.arguments["path"] for task in tasks_of(plan, "read_text_file")] == [str(here / "Makefile")]


def test_a_path_no_tool_takes_is_listed_as_unplanned(here: Path) -> None:
    catalog = files_catalog({"read_text_file": {"path": "file"}})  # list_directory takes nothing named
    plan = plan_query(f"{REFUND} under ./docs/refund-policy.md? And what is in ./archive?", catalog)
    assert [task.arguments for task in tasks_of(plan, "read_text_file")] == [
        {"path": absolute("./docs/refund-policy.md")}
    ]
    assert tasks_of(plan, "list_directory") == []
    assert tasks_of(plan, "refund_eligibility")
    [unplanned] = [item for item in plan.unplanned if item.what == absolute("./archive")]
    assert "no registered source's tool takes it" in unplanned.why


def test_a_plan_naming_a_tool_the_source_does_not_offer_is_refused() -> None:
    catalog = files_catalog()
    delete = PlannedTask("delete", "files", "delete_file", {"path": "/srv/x"})
    for offered in (catalog.offered, catalog.plannable):
        with pytest.raises(PlanError, match="unknown tool 'delete_file' of files") as raised:
            Plan.of("delete /srv/x", [delete], offered=offered)
        assert "read_text_file" in str(raised.value)
    read = PlannedTask("read", "files", "read_text_file", {"path": "/srv/x"})
    assert Plan.of("read /srv/x", [read], offered=catalog.plannable).tasks == {"read": read}
    with pytest.raises(PlanError, match="unknown source 'files'"):
        Plan.of("read /srv/x", [read])  # the demo sources alone offer no such source


def test_a_plan_may_name_a_write_tool_the_server_offers_only_if_the_entry_names_it() -> None:
    write_file = PlannedTask("write", "files", "write_file", {"path": "/srv/x", "content": "hello"})
    catalog = files_catalog()
    assert "write_file" in catalog.offered["files"]
    with pytest.raises(PlanError, match="unknown tool 'write_file' of files"):
        Plan.of("overwrite /srv/x", [write_file], offered=catalog.plannable)
    named = files_catalog({"write_file": {"path": "file", "content": "text"}})
    assert Plan.of("overwrite /srv/x", [write_file], offered=named.plannable).tasks == {"write": write_file}
    assert (
        catalog.plannable["billing"] == demo_catalog().plannable["billing"]
    )  # the demo sources' as they were


def test_a_path_for_a_source_that_could_not_be_listed_is_reported_with_why(here: Path) -> None:
    entry = SourceEntry(name="files", command=("npx", "server-filesystem", "."), plan=HINTS)
    catalog = demo_catalog().without("files", "could not list its tools: FileNotFoundError: npx", entry)
    plan = plan_query(f"{REFUND} under ./docs/refund-policy.md?", catalog)
    assert {task.source for task in plan.order()} <= set(SOURCES)
    [unplanned] = [item for item in plan.unplanned if item.what == absolute("./docs/refund-policy.md")]
    assert "could not list its tools" in unplanned.why


def test_a_price_per_month_is_no_folder_to_list(here: Path) -> None:
    plan = plan_query("Is the £45.00/month plan refundable on ORD-10031?", files_catalog())
    assert tasks_of(plan, "refund_eligibility")
    assert tasks_of(plan, "list_directory") == []  # not "/month", the root folder's "month"
    assert not any(item.what == "/month" for item in plan.unplanned)


def clock_catalog(catalog: Catalog | None = None) -> Catalog:
    entry = SourceEntry(
        name="clock",
        url="http://127.0.0.1:9000/mcp",
        entities={"timezone": TIMEZONE},
        plan={"current_time": {"timezone": "timezone"}},
    )
    tools = [ListedTool("current_time", schema("timezone"), read_only=True)]
    return with_registered(catalog or demo_catalog(), "clock", tools, entry)


@given(timezones)
@SETTINGS
def test_a_tool_taking_a_kind_of_its_own_is_planned_once_per_thing_of_that_kind(named: list[str]) -> None:
    plan = plan_query(f"{REFUND}, and what time is it in {' and '.join(named)}?", clock_catalog())
    calls = [task.arguments for task in tasks_of(plan, "current_time")]
    assert sorted(calls, key=str) == sorted(({"timezone": zone} for zone in set(named)), key=str)
    assert all(task.source == "clock" for task in tasks_of(plan, "current_time"))
    assert len(tasks_of(plan, "refund_eligibility")) == 1
    assert not clock_catalog().reads_paths  # a source taking no path does not make paths read


KINDS = st.sampled_from(["file", "folder", "path", "timezone", "text"])


@st.composite
def listed_servers(draw: st.DrawFn) -> tuple[list[ListedTool], dict[str, dict[str, str]]]:
    """A server's tools (string arguments, some required, some read-only) and the entry's hints: most
    tools hinted (an argument or two left without a kind), a few naming an argument the tool lacks."""
    tools, hints = [], {}
    tool_names = st.lists(lower_words(LOWER + "_", 11, least=2), min_size=1, max_size=6, unique=True)
    for name in draw(tool_names):
        arguments = draw(
            st.lists(st.sampled_from(["path", "target", "zone", "content", "limit"]), max_size=3, unique=True)
        )
        required = draw(st.lists(st.sampled_from(arguments), unique=True)) if arguments else []
        tools.append(
            ListedTool(name, schema(*arguments, required=tuple(required)), read_only=draw(st.booleans()))
        )
        if draw(st.integers(0, 3)) == 3:  # (the simplest draw, which comes often, is the common case)
            continue  # no hint: planned only if it reads, and then only what its schema says
        kinds = {argument: draw(KINDS | KINDS | st.none()) for argument in arguments}
        hints[name] = {argument: kind for argument, kind in kinds.items() if kind is not None}
        if draw(st.integers(0, 5)) == 5:
            hints[name]["missing"] = draw(KINDS)
    return tools, hints


@given(listed_servers(), st.lists(written_paths(form="./"), min_size=1, max_size=3, unique=True), timezones)
@HEAVY
def test_only_plannable_tools_are_planned_and_nothing_named_is_dropped(
    here: Path, server: tuple[list[ListedTool], dict[str, dict[str, str]]], paths: list[str], named: list[str]
) -> None:
    tools, hints = server
    entry = SourceEntry(name="gen", command=("srv",), entities={"timezone": TIMEZONE}, plan=hints)
    catalog = with_registered(demo_catalog(), "gen", tools, entry)
    for tool in tools:
        key = f"gen.{tool.name}"
        assert (key in catalog.registered) != (key in catalog.not_usable), key
        if not tool.read_only and tool.name not in hints:
            assert catalog.not_usable[key].startswith("not read-only")
        if "missing" in hints.get(tool.name, {}):
            assert key in catalog.not_usable
    plan = plan_query(f"{REFUND}? Read {', '.join(paths)} in {' and '.join(named)}.", catalog)
    for task in plan.order():
        if task.source == "gen":
            key = f"gen.{task.tool}"
            assert key in catalog.registered, key
            required = {name for name, argument in catalog.tools[key].items() if argument.required}
            assert required <= set(task.arguments), task
    used = {str(value) for task in plan.order() for value in task.arguments.values()}
    listed = " ".join(str(item) for item in plan.unplanned)
    if not catalog.reads_paths:
        return  # no tool takes a path: paths are not read, as without the source
    for path in paths:
        assert absolute(path) in used or absolute(path) in listed, path


def test_the_demo_planner_reads_no_path(here: Path) -> None:
    plan = plan_query(f"{REFUND} under ./docs/refund-policy.md?")
    assert {task.source for task in plan.order()} <= set(SOURCES)
    assert tasks_of(plan, "refund_eligibility")
    assert not any("refund-policy.md" in str(item) for item in plan.unplanned)


@pytest.mark.parametrize("field", ["command", "cwd", "env"])
def test_a_nul_that_no_process_can_be_given_is_a_clear_error(field: str) -> None:
    given: dict[str, Any] = {"command": ["srv", "a\x00b"], "cwd": "here/a\x00b", "env": {"A": "b\x00"}}
    table = {"name": "docs", "command": ["srv"], field: given[field]}
    with pytest.raises(ValidationError, match="NUL character"):
        SourceEntry.model_validate(table)
