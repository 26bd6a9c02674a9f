"""The process environment read as settings, by pydantic-settings: one ``Environment`` per settings object.

Each variable is a field named for it less the class's prefix (``RESEARCH_SEED`` is ``seed`` of
``SourceEnvironment``), with its default and the form it takes. A value not of that form fails at
once, in one line that names the variable, the form and an example::

    RESEARCH_SEED must be a whole number, 0 or more, e.g. 42; got 'forty-two'

An empty variable counts as unset, and names are matched ignoring case (pydantic-settings' way).
Only the environment is read, no ``.env`` file or secrets folder; or a mapping given in its place
(``Environment.read(environ)``): a child's environment, a test's.

``sources.settings`` imports this module when it first reads the environment, not at its own
import: pydantic-settings takes a fifth of a second to import, which a command that only needs the
data folder should not pay.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Self, TypeVar

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from sources import defaults

__all__ = ["Environment", "SourceEnvironment", "variable"]

T = TypeVar("T")


def variable(
    default: T, form: str, *, ge: float | None = None, gt: float | None = None, alias: str | None = None
) -> T:
    """A field read from one variable (``alias``, when not named for it): its default, and its form
    as an error states it ("a whole number")."""
    return Field(default, description=form, ge=ge, gt=gt, validation_alias=alias)


class _Given(EnvSettingsSource):
    """The environment source reading a given mapping, in the place of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ  # read by ``_load_env_vars``, which the base class's constructor calls
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # What the base class does with ``os.environ`` (and its .env subclass with a file's variables).
        return {
            name if self.case_sensitive else name.lower(): value
            for name, value in self._environ.items()
            if value or not self.env_ignore_empty
        }


class Environment(BaseSettings):
    """Settings read from environment variables; subclasses declare the variables, with a prefix."""

    model_config = SettingsConfigDict(env_ignore_empty=True, extra="ignore", frozen=True)

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> Self:
        """The variables of ``environ``, or of this process's environment; a bad one raises ``ValueError``."""
        given = _Given(cls, os.environ if environ is None else environ)
        try:
            return cls(_build_sources=((given,), {}))
        except ValidationError as exc:
            raise ValueError(cls._complaint(exc)) from None

    @classmethod
    def _complaint(cls, exc: ValidationError) -> str:
        """The first bad variable: its name, the form it takes, an example (its default), and its value."""
        error = exc.errors()[0]
        key = str(error["loc"][0])
        name, field = next(
            (name, field) for name, field in cls.model_fields.items() if key in (name, field.validation_alias)
        )
        variable = (
            field.validation_alias
            if isinstance(field.validation_alias, str)
            else f"{cls.model_config.get('env_prefix', '')}{name}".upper()
        )
        return f"{variable} must be {field.description}, e.g. {field.default}; got {error['input']!r}"


_WHOLE = "a whole number, 0 or more"


class SourceEnvironment(Environment):
    """The ``RESEARCH_*`` variables a source reads (the table in ``sources.settings``), as given.

    ``RESEARCH_DATA_DIR`` is not among them: ``sources.settings.data_dir_from`` reads it, on paths
    that must not import this module.
    """

    model_config = SettingsConfigDict(env_prefix="RESEARCH_")

    seed: int = variable(defaults.SEED, _WHOLE, ge=0)
    signing_key_pem: str | None = Field(default=None, validation_alias="RESEARCH_SIGNING_KEY")
    public_key_pem: str | None = Field(default=None, validation_alias="RESEARCH_PUBLIC_KEY")
    faults: str = ""  # ``FaultSettings.parse`` reads it
    kb_warmup_ms: int = variable(defaults.KB_WARMUP_MS, _WHOLE, ge=0)
    tickets_rate_per_second: float = variable(
        defaults.TICKETS_RATE_PER_SECOND, "a number, 0 or more", ge=0, alias="RESEARCH_TICKETS_RATE"
    )
    tickets_burst: int = variable(defaults.TICKETS_BURST, _WHOLE, ge=0)
    traces_dir: Path | None = None
    trace_payloads: str = ""  # "full", or redacted
    run_id: str | None = None
    http_session_idle_s: float = variable(
        defaults.HTTP_SESSION_IDLE_S, "a number of seconds greater than 0", gt=0
    )
    http_max_sessions: int = variable(defaults.HTTP_MAX_SESSIONS, "a whole number greater than 0", gt=0)
