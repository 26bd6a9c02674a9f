"""Where a source finds its data and its credential keys: the environment, with safe defaults.

| variable               | meaning                                                  | default                       |
|------------------------|----------------------------------------------------------|-------------------------------|
| `RESEARCH_DATA_DIR`    | folder (0700) for the generated SQLite data and the key pair | the user's cache folder   |
| `RESEARCH_SEED`        | seed of the generated demo data                          | 42                            |
| `RESEARCH_SIGNING_KEY` | the coordinator's Ed25519 private key (PEM) that signs credentials; never given to a source | the pair made once in the data folder |
| `RESEARCH_PUBLIC_KEY`  | the Ed25519 public key (PEM) a source verifies credentials with | the data folder's public key file |
| `RESEARCH_FAULTS`      | the fault layer's settings (see `sources.faults`)        | no faults                     |
| `RESEARCH_KB_WARMUP_MS` | how long the kb index warms up after start (transient errors meanwhile) | 1000 |
| `RESEARCH_TICKETS_RATE`, `RESEARCH_TICKETS_BURST` | tickets' rate limit: calls per second, and the burst allowed | 5 per second, burst 10 |
| `RESEARCH_TRACES_DIR`  | where the file exporter writes spans                     | `<data dir>/traces`           |
| `RESEARCH_TRACE_PAYLOADS` | `full` keeps queries, arguments and answers with personal data unredacted in traces, recordings and logs (local debugging only) | redacted |
| `RESEARCH_RUN_ID`      | the run a process belongs to (set by the coordinator for its sources) | none      |
| `RESEARCH_HTTP_SESSION_IDLE_S` | over HTTP: seconds after which a session with nothing in flight ends | 300 |
| `RESEARCH_HTTP_MAX_SESSIONS` | over HTTP: most sessions held at once, for anonymous clients and, separately, for clients that opened theirs with a bearer token; more are refused (503) until some end | 1000 |

The standard `OTEL_*` variables (exporter choice, OTLP endpoint...) are passed to spawned sources too,
except `OTEL_SERVICE_NAME`: each process names its own service.

A stdio child gets only a safe subset of its parent's environment, so a parent that spawns sources
passes these explicitly (``SourceSettings.child_environment``): the public key, never the private one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from sources import defaults
from sources.deferred import deferred

# The faults' and the keys' modules load when first used, not with this one: a command that only
# needs to know where the data folder is (asking the coordinator service) stays quick. pydantic-settings
# is slow to import too (see sources.environment).
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from sources import environment
    from sources import faults as fault_layer
    from sources.faults import FaultSettings
    from sources.security import keys
else:
    environment = deferred("sources.environment")
    fault_layer = deferred("sources.faults")
    keys = deferred("sources.security.keys")

__all__ = ["PUBLIC_KEY_ENV", "SIGNING_KEY_ENV", "SourceSettings", "data_dir_from"]

SIGNING_KEY_ENV = "RESEARCH_SIGNING_KEY"  # the private key: the coordinator's, never a source's
PUBLIC_KEY_ENV = "RESEARCH_PUBLIC_KEY"


def data_dir_from(environ: Mapping[str, str] | None = None) -> Path:
    """The data folder: ``RESEARCH_DATA_DIR``, or the user's cache folder."""
    env = os.environ if environ is None else environ
    return Path(env.get("RESEARCH_DATA_DIR") or platformdirs.user_cache_dir("research-coordinator"))


def _no_faults() -> FaultSettings:
    return fault_layer.FaultSettings()


@dataclass(frozen=True)
class SourceSettings:
    data_dir: Path
    seed: int = defaults.SEED
    signing_key_pem: str | None = None  # the private key; a source never reads it (see signing_key)
    public_key_pem: str | None = None
    faults: FaultSettings = field(default_factory=_no_faults)
    kb_warmup_ms: int = defaults.KB_WARMUP_MS
    tickets_rate_per_second: float = defaults.TICKETS_RATE_PER_SECOND
    tickets_burst: int = defaults.TICKETS_BURST
    traces_dir: Path | None = None
    full_payloads: bool = False
    run_id: str | None = None
    http_session_idle_s: float = defaults.HTTP_SESSION_IDLE_S  # why these two: sources.defaults
    http_max_sessions: int = defaults.HTTP_MAX_SESSIONS
    # The exporters this run's processes use, when its command chose them (`research ask --otlp` adds
    # OTLP): given to spawned sources as OTEL_TRACES_EXPORTER. None: the variable as it is here.
    trace_exporters: tuple[str, ...] | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SourceSettings:
        """Settings from the variables above, or from ``environ`` in their place.

        A bad value raises ``ValueError`` naming the variable, the form it takes and an example.
        """
        env = environment.SourceEnvironment.read(environ)
        return cls(
            data_dir=data_dir_from(environ),
            faults=fault_layer.FaultSettings.parse(env.faults),
            full_payloads=env.trace_payloads.lower() == "full",
            **env.model_dump(exclude={"faults", "trace_payloads"}),  # the others named as the fields
        )

    def with_faults(self, faults: FaultSettings) -> SourceSettings:
        return replace(self, faults=faults)

    @property
    def traces_path(self) -> Path:
        return self.traces_dir or self.data_dir / "traces"

    def signing_key(self) -> Ed25519PrivateKey:
        """The coordinator's key that signs credentials: configured, or the data folder's pair (made once).

        The coordinator's side only: a source verifies with ``verification_key`` and cannot sign.
        """
        if self.signing_key_pem:
            return keys.load_private_pem(self.signing_key_pem, SIGNING_KEY_ENV)
        return keys.ensure_key_pair(self.data_dir)

    def verification_key(self) -> Ed25519PublicKey | None:
        """The public key a source verifies credentials with: configured, or the data folder's.

        None while no coordinator has made the pair (a source started first); never the private key.
        """
        if self.public_key_pem:
            return keys.load_public_pem(self.public_key_pem, PUBLIC_KEY_ENV)
        return keys.read_public_key(self.data_dir)

    def without_signing_key(self) -> SourceSettings:
        """These settings as a source keeps them: with no private key in them."""
        return replace(self, signing_key_pem=None)

    def child_environment(self) -> dict[str, str]:
        """The variables a spawned source needs to see the same world and trust the same credentials.

        The public key only: a source that is given this environment can verify credentials, not mint them.
        """
        env = {
            "RESEARCH_DATA_DIR": str(self.data_dir),
            "RESEARCH_SEED": str(self.seed),
            "RESEARCH_KB_WARMUP_MS": str(self.kb_warmup_ms),
            "RESEARCH_TICKETS_RATE": str(self.tickets_rate_per_second),
            "RESEARCH_TICKETS_BURST": str(self.tickets_burst),
            "RESEARCH_HTTP_SESSION_IDLE_S": str(self.http_session_idle_s),
            "RESEARCH_HTTP_MAX_SESSIONS": str(self.http_max_sessions),
            "RESEARCH_LIFELINE": "stdin",  # a stdio child exits the moment its client hangs up
        }
        # The public half of the key this process signs with (the pair made now if need be), so the
        # child accepts exactly the credentials its spawner issues. Never the private half.
        env[PUBLIC_KEY_ENV] = keys.public_pem(self.signing_key())
        if self.faults.active:
            env["RESEARCH_FAULTS"] = self.faults.spec()
        if self.traces_dir is not None:  # otherwise the child derives the same folder from the data folder
            env["RESEARCH_TRACES_DIR"] = str(self.traces_dir)
        if self.full_payloads:
            env["RESEARCH_TRACE_PAYLOADS"] = "full"
        if self.run_id:
            env["RESEARCH_RUN_ID"] = self.run_id
        env.update(
            {
                name: value
                for name, value in os.environ.items()
                if name.startswith("OTEL_") and name != "OTEL_SERVICE_NAME"
            }
        )
        if self.trace_exporters is not None:
            env["OTEL_TRACES_EXPORTER"] = ",".join(self.trace_exporters) or "none"
        return env
