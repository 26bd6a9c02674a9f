"""The docs' reference pages, generated from the code that already holds each fact (a mkdocs hook).

A page asks for a generated part with a marker on a line of its own::

    <!-- generated: cli -->

and the build replaces it: the CLI from typer's own docs writer, the models' fields from their
pydantic JSON schemas, the settings from the pydantic-settings classes, the error categories from
``sources/contract.py``, the exit statuses from the CLI's constants. So the reference cannot drift
from the code: change a field, a default or an option, and the next build shows it. An unknown
marker, or a setting a page leaves unexplained, fails the build.

Links from a page to a file of the repository outside ``docs/`` (``../../sources/contract.py``)
work where the Markdown is read on its own (a code host); the site has no copy of the code, so the
build shows them as the path in code type, and copies the images a page shows from outside ``docs/``.
"""

from __future__ import annotations

import inspect
import json
import posixpath
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from pydantic import BaseModel

MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.MULTILINE)
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
REPO_FILES = "_repository"  # where the site keeps the images pages show from outside docs/


def cli() -> str:
    """Every command's usage, arguments and options, as typer writes them (``typer ... utils docs``)."""
    import typer
    from typer.cli import get_docs_for_click

    from coordinator.cli import app

    command = typer.main.get_command(app)
    context = typer.Context(command)
    docs = get_docs_for_click(obj=command, ctx=context, name="research", title="`research`")
    # typer's headings start at h1; the page has its own title, so every heading goes one level down.
    return re.sub(r"^(#+) ", r"#\1 ", docs, flags=re.MULTILINE)


def _type_of(schema: dict[str, Any] | bool) -> str:
    if isinstance(schema, bool):  # `additionalProperties: true`: any value
        return "any"
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in schema:
        return " or ".join(_type_of(option) for option in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if schema.get("type") == "array":
        return f"list of {_type_of(schema.get('items', {}))}"
    if schema.get("type") == "object" and "additionalProperties" in schema:
        return f"object of {_type_of(schema['additionalProperties'])}"
    return f"`{schema.get('type', 'any')}`"


def _model_tables(model: type[BaseModel], seen: set[str] | None = None) -> str:
    """One table per model of a JSON schema (the model and every model it refers to, unless ``seen``
    already): its fields, by the names they have on the wire."""
    schema = model.model_json_schema(by_alias=True)
    models = {schema["title"]: schema, **schema.get("$defs", {})}
    seen = set() if seen is None else seen
    parts = []
    for title, definition in models.items():
        if "properties" not in definition or title in seen:  # an enum is listed where it is used
            continue
        seen.add(title)
        required = set(definition.get("required", ()))
        rows = ["| field | type | required | default | description |", "|---|---|---|---|---|"]
        for name, field in definition["properties"].items():
            default = f"`{json.dumps(field['default'])}`" if "default" in field else ""
            description = " ".join(field.get("description", "").split())
            rows.append(
                f"| `{name}` | {_type_of(field)} | {'yes' if name in required else ''} | {default} | {description} |"
            )
        about = " ".join(definition.get("description", "").split())
        parts.append(f"### `{title}`\n\n{about}\n\n" + "\n".join(rows))
    return "\n\n".join(parts)


def report_schema() -> str:
    """The report ``research ask --json`` prints: its models' fields, then the whole JSON schema."""
    from coordinator import ResearchReport

    schema = json.dumps(ResearchReport.model_json_schema(), indent=2)
    return (
        _model_tables(ResearchReport)
        + '\n\n??? note "The JSON schema (`ResearchReport.model_json_schema()`)"\n\n'
        + "    ```json\n"
        + "\n".join(f"    {line}" for line in schema.splitlines())
        + "\n    ```"
    )


def _member_comments(enum: type) -> Iterator[tuple[str, str]]:
    """An enum's values with the comment each has in its source (``NAME = "value"  # comment``)."""
    for line in inspect.getsource(enum).splitlines():
        if found := re.match(r'\s+[A-Z_]+ = "([^"]+)"\s+# (.+)$', line):
            yield found[1], found[2]


def error_contract() -> str:
    """The categories and the wire models of ``sources/contract.py``, and the subagent's escalation."""
    from sources.contract import AttemptedQuery, EmptyResult, ErrorCategory, ResultPage, ToolError
    from subagents.decisions import Escalation

    rows = ["| `errorCategory` | what it means |", "|---|---|"]
    described = dict(_member_comments(ErrorCategory))
    if set(described) != {category.value for category in ErrorCategory}:
        raise PluginError(f"every ErrorCategory member needs its comment in sources/contract.py: {described}")
    rows += [f"| `{value}` | {meaning} |" for value, meaning in described.items()]
    models = [ToolError, ResultPage[Any], EmptyResult, AttemptedQuery, Escalation]
    seen: set[str] = set()
    return "\n".join(rows) + "\n\n" + "\n\n".join(_model_tables(model, seen) for model in models)


def _meanings() -> dict[str, str]:
    """What each variable means, where the code says it: the table of ``sources.settings``'s docstring,
    and the comment on each field of ``ClaudeSettings``."""
    import sources.settings
    from subagents.claude import ClaudeSettings

    meanings = {}
    for found in re.finditer(
        r"^\| (`\w+`(?:, `\w+`)*)\s*\| (.+?) \|[^|]*\|$", sources.settings.__doc__ or "", re.M
    ):
        meanings.update(dict.fromkeys(re.findall(r"`(\w+)`", found[1]), found[2].strip()))
    for line in inspect.getsource(ClaudeSettings).splitlines():
        if found := re.match(r"\s+(\w+): .+? = .+?\s+# (.+)$", line):
            meanings[f"RESEARCH_CLAUDE_{found[1].upper()}"] = found[2]
    return meanings


def settings() -> str:
    """Every variable a settings class reads: what it means, the form it takes, its default."""
    import subagents.claude  # noqa: F401  (declares the Claude mode's variables)
    from sources.environment import Environment

    meanings = _meanings()
    tables: list[str] = []
    unexplained: list[str] = []
    for environment in Environment.__subclasses__():
        prefix = environment.model_config.get("env_prefix", "")
        rows = ["| variable | meaning | form | default |", "|---|---|---|---|"]
        for name, field in environment.model_fields.items():
            alias = field.validation_alias
            variable = alias if isinstance(alias, str) else f"{prefix}{name}".upper()
            if variable not in meanings and not variable.startswith("ANTHROPIC_"):
                unexplained.append(variable)
            meaning = meanings.get(
                variable, "the Messages API's own variable (the anthropic SDK reads it too)"
            )
            form = field.description or ("text" if field.annotation in (str, str | None) else "a path")
            default = "" if field.default in (None, "") else f"`{field.default}`"
            rows.append(f"| `{variable}` | {meaning} | {form} | {default} |")
        about = (environment.__doc__ or "").split("\n")[0]
        tables.append(
            f"### `{environment.__module__}.{environment.__name__}`\n\n{about}\n\n" + "\n".join(rows)
        )
    if unexplained:
        raise PluginError(
            f"no meaning in the code for {', '.join(unexplained)}: add each to the settings' table"
        )
    return "\n\n".join(tables)


def exit_statuses() -> str:
    """The statuses every command exits with, from the constants the CLI uses."""
    from coordinator.cli import common

    source = inspect.getsource(common)
    rows = ["| status | name | when |", "|---|---|---|"]
    for line in source.splitlines():
        if found := re.match(r"(EXIT_\w+(?:, EXIT_\w+)*) = ([\d, ]+?)(?:\s+# (.+))?$", line):
            names, values = found[1].split(", "), found[2].split(", ")
            for name, value in zip(names, values, strict=True):
                rows.append(f"| {value} | `{name}` | {found[3] or ''} |")
    return "\n".join(rows)


def contributing() -> str:
    """CONTRIBUTING.md, whose links are relative to the repository's root, as a page of docs/."""
    text = (Path(__file__).parent.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return LINK.sub(lambda found: f"{found[1]}[{found[2]}]({_rebased(found[3])})", text)


def _rebased(target: str) -> str:
    """A link relative to the repository's root, made relative to docs/ (where the page is)."""
    if re.match(r"^[a-z]+:|^#|^/", target):
        return target
    return target.removeprefix("docs/") if target.startswith("docs/") else f"../{target}"


GENERATED: dict[str, Callable[[], str]] = {
    "contributing": contributing,
    "cli": cli,
    "report-schema": report_schema,
    "error-contract": error_contract,
    "settings": settings,
    "exit-statuses": exit_statuses,
}


def _outside_docs(page: Page, target: str, docs_dir: Path) -> Path | None:
    """The repository file a relative link points to, when it is outside docs/."""
    if re.match(r"^[a-z]+:|^#|^/", target):
        return None
    path = (docs_dir / Path(page.file.src_uri).parent / target.split("#")[0]).resolve()
    return None if path.is_relative_to(docs_dir.resolve()) else path


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Copy into the site every image a page shows from outside docs/ (the thesis's chart)."""
    docs_dir = Path(config.docs_dir).resolve()
    repository = docs_dir.parent
    for file in list(files.documentation_pages()):
        text = Path(file.abs_src_path or "").read_text(encoding="utf-8")
        for bang, _, target in LINK.findall(text):
            path = (docs_dir / Path(file.src_uri).parent / target).resolve()
            if bang and not path.is_relative_to(docs_dir) and path.is_file():
                uri = f"{REPO_FILES}/{path.relative_to(repository).as_posix()}"
                if files.get_file_from_path(uri) is None:
                    files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    def generate(found: re.Match[str]) -> str:
        if found[1] not in GENERATED:
            raise PluginError(
                f"{page.file.src_uri}: no generator for '{found[1]}' (known: {', '.join(GENERATED)})"
            )
        return GENERATED[found[1]]()

    docs_dir = Path(config.docs_dir).resolve()
    repository = docs_dir.parent

    def relink(found: re.Match[str]) -> str:
        bang, text, target = found[1], found[2], found[3]
        path = _outside_docs(page, target, docs_dir)
        if path is None:
            return found[0]
        if not path.exists():
            raise PluginError(f"{page.file.src_uri}: links to {target}, which is not in the repository")
        if bang:
            uri = f"{REPO_FILES}/{path.relative_to(repository).as_posix()}"
            return f"![{text}]({posixpath.relpath(uri, posixpath.dirname(page.file.src_uri))})"
        return text if text.startswith("`") else f"`{path.relative_to(repository).as_posix()}`"

    return LINK.sub(relink, MARKER.sub(generate, markdown))
