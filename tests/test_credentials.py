"""Credentials that sources cannot mint: Ed25519 signatures, one audience per source, a lifetime cap
enforced when verifying, and key files only their owner can open.

The attacks go through the mcp Client to a real source, as a caller would send them; each is refused
as a `permission` error that says why and never quotes the token.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp import Client
from mcp.server import MCPServer

from sources.security.auth import (
    CREDENTIAL_META_KEY,
    MAX_CREDENTIAL_LIFETIME_S,
    CredentialCheck,
    CredentialRejected,
    Principal,
    audience_of,
    issue_credential,
)
from sources.security.keys import (
    PRIVATE_KEY_FILE,
    PUBLIC_KEY_FILE,
    ensure_key_pair,
    public_pem,
    read_public_key,
)
from sources.settings import PUBLIC_KEY_ENV, SIGNING_KEY_ENV, SourceSettings
from sources.world import world_path
from tests.conftest import PROJECT_ROOT, TEST_KEY, HttpSource, call, credential, wire

pytestmark = pytest.mark.anyio

RESTRICTED = {"identifier": "vip@example.com"}  # a restricted record: customers:restricted serves it


@pytest.fixture
def server(server_for: Callable[..., MCPServer]) -> MCPServer:
    return server_for("customers")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict[str, Any], claims: dict[str, Any], sign: Callable[[bytes], bytes]) -> str:
    """A JWT put together by hand, as an attacker would, signed by ``sign`` over its first two parts."""
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{_b64(sign(signing_input.encode()))}"


def claims(**changes: Any) -> dict[str, Any]:
    """Claims that customers would accept, but for ``changes`` (a None value drops the claim)."""
    now = int(time.time())
    base = {
        "sub": "intruder",
        "scope": "customers:restricted",
        "aud": audience_of("customers"),
        "iat": now,
        "exp": now + 60,
    }
    merged = {**base, **changes}
    return {name: value for name, value in merged.items() if value is not None}


def signed(**changes: Any) -> str:
    """Correctly signed with the coordinator's own key: only the claims are wrong."""
    return jwt.encode(claims(**changes), TEST_KEY, algorithm="EdDSA")


def hs256_with(secret: bytes) -> Callable[[bytes], bytes]:
    return lambda message: hmac.new(secret, message, hashlib.sha256).digest()


PUBLIC_PEM = public_pem(TEST_KEY).encode()
PUBLIC_RAW = TEST_KEY.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

ATTACKS: dict[str, tuple[Callable[[], str], str]] = {
    "for another source": (lambda: signed(aud=audience_of("billing")), "not meant for customers"),
    "for several sources": (
        lambda: signed(aud=[audience_of("customers"), audience_of("billing")]),
        "not meant for customers",
    ),
    "for no source": (lambda: signed(aud=None), "no 'aud' claim"),
    "the old shared audience": (lambda: signed(aud="research-sources"), "not meant for customers"),
    "a lifetime beyond the cap": (
        lambda: signed(exp=int(time.time()) + MAX_CREDENTIAL_LIFETIME_S + 1),
        f"more than the {MAX_CREDENTIAL_LIFETIME_S} allowed",
    ),
    "a hundred years": (
        lambda: signed(exp=int(time.time()) + 100 * 365 * 86400),
        f"more than the {MAX_CREDENTIAL_LIFETIME_S} allowed",
    ),
    "no issue time": (lambda: signed(iat=None), "no 'iat' claim"),
    "no expiry": (lambda: signed(exp=None), "no 'exp' claim"),
    "issued in the future": (
        lambda: signed(iat=int(time.time()) + 3600, exp=int(time.time()) + 3660),
        "issued in the future",
    ),
    "expired": (
        lambda: credential("customers:restricted", source="customers", now=0)[CREDENTIAL_META_KEY],
        "expired",
    ),
    "expired, within the cap": (
        lambda: signed(iat=int(time.time()) - 120, exp=int(time.time()) - 60),
        "expired",
    ),
    "HS256 keyed with the public key's PEM": (
        lambda: forge({"alg": "HS256", "typ": "JWT"}, claims(), hs256_with(PUBLIC_PEM)),
        "not signed with EdDSA",
    ),
    "HS256 keyed with the public key's raw bytes": (
        lambda: forge({"alg": "HS256", "typ": "JWT"}, claims(), hs256_with(PUBLIC_RAW)),
        "not signed with EdDSA",
    ),
    "alg none": (
        lambda: forge({"alg": "none", "typ": "JWT"}, claims(), lambda _: b""),
        "not signed with EdDSA",
    ),
    "alg None, capitalised": (
        lambda: forge({"alg": "None", "typ": "JWT"}, claims(), lambda _: b""),
        "not signed with EdDSA",
    ),
    "signed by another key": (
        lambda: jwt.encode(claims(), Ed25519PrivateKey.generate(), algorithm="EdDSA"),
        "signature is not valid",
    ),
}


async def test_a_well_formed_credential_is_served(server: MCPServer) -> None:
    """The control: the claims the attacks start from, signed properly, are accepted."""
    result = await call(server, "customer_lookup", RESTRICTED, {CREDENTIAL_META_KEY: signed()})
    assert result.is_error is False and wire(result)["results"][0]["id"] == "CUST-00001"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
async def test_an_attack_is_refused_without_echoing_the_token(server: MCPServer, attack: str) -> None:
    make, reason = ATTACKS[attack]
    token = make()
    result = await call(server, "customer_lookup", RESTRICTED, {CREDENTIAL_META_KEY: token})
    payload = wire(result)
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and payload["errorCategory"] == "permission", payload
    assert payload["description"].startswith("The credential presented was rejected: ") and reason in text
    assert token not in text and token.split(".")[1] not in text  # nor its claims, encoded
    assert "Victoria" not in text  # the restricted record stayed put


def test_the_issuer_refuses_a_lifetime_beyond_the_cap() -> None:
    with pytest.raises(ValueError, match=f"between 1 and {MAX_CREDENTIAL_LIFETIME_S} seconds"):
        issue_credential(TEST_KEY, "agent", ["billing:read"], source="billing", ttl_seconds=3600)
    token = issue_credential(TEST_KEY, "agent", ["billing:read"], source="billing")
    decoded = jwt.decode(token, TEST_KEY.public_key(), algorithms=["EdDSA"], audience=audience_of("billing"))
    assert decoded["exp"] - decoded["iat"] <= MAX_CREDENTIAL_LIFETIME_S  # the default fits the cap


def test_a_credential_verified_once_is_known_until_it_expires_and_no_longer() -> None:
    """A source verifies a credential's signature once and then knows it by its text; the memory
    never outlives the credential, and a refusal is never remembered as a success."""
    now = [time.time()]
    check = CredentialCheck("billing", TEST_KEY.public_key, clock=lambda: now[0])
    token = issue_credential(TEST_KEY, "agent", ["billing:read"], source="billing", ttl_seconds=60)
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    assert check.verify(token) == Principal("agent", frozenset({"billing:read"}))
    assert check.verify(token) == Principal("agent", frozenset({"billing:read"}))  # known, not re-verified
    now[0] = expires - 0.001
    assert check.verify(token).subject == "agent"
    now[0] = expires  # valid while before exp, as the first verification decides
    with pytest.raises(CredentialRejected, match="the credential has expired"):
        check.verify(token)
    with pytest.raises(CredentialRejected, match="is not meant for billing"):  # refused, every time
        check.verify(issue_credential(TEST_KEY, "agent", ["billing:read"], source="customers"))
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    with pytest.raises(CredentialRejected, match=r"signature is not valid|malformed"):
        check.verify(tampered)  # another text: verified on its own, never taken for the known one


# --- what a source holds -----------------------------------------------------------------------


def test_a_source_child_gets_the_public_key_only(settings: SourceSettings) -> None:
    environment = settings.child_environment()
    assert SIGNING_KEY_ENV not in environment
    assert not any("PRIVATE KEY" in value for value in environment.values())
    assert environment[PUBLIC_KEY_ENV] == public_pem(TEST_KEY)
    child = SourceSettings.from_environment(environment)
    assert child.signing_key_pem is None
    key = child.verification_key()
    assert key is not None and public_pem(key) == public_pem(TEST_KEY)


def test_a_spawner_with_no_configured_key_passes_the_public_half_of_its_own(tmp_path: Path) -> None:
    coordinator = SourceSettings(data_dir=tmp_path / "data")
    environment = coordinator.child_environment()
    assert not any("PRIVATE KEY" in value for value in environment.values())
    assert environment[PUBLIC_KEY_ENV] == public_pem(coordinator.signing_key())


def started_with(pid: int) -> bytes:
    """The environment a process was started with, where the system shows it (Linux); else nothing."""
    environ = Path(f"/proc/{pid}/environ")
    return environ.read_bytes() if environ.exists() else b""


@pytest.mark.subprocess
async def test_a_source_process_verifies_with_the_public_key_and_holds_no_private_one(
    http_source: Callable[..., HttpSource],
) -> None:
    running = http_source("billing")
    assert b"PRIVATE KEY" not in started_with(running.process.pid)
    arguments = {"customer_id": "CUST-00042"}
    async with Client(running.url, read_timeout_seconds=10) as client:
        served = await client.call_tool(
            "list_invoices",
            arguments,
            read_timeout_seconds=10,
            meta=credential("billing:read", source="billing"),
        )
        assert served.is_error is False
        meta = credential("billing:read", source="customers")
        refused = await client.call_tool("list_invoices", arguments, read_timeout_seconds=10, meta=meta)
    assert wire(refused)["errorCategory"] == "permission"
    assert "not meant for billing" in wire(refused)["description"]
    assert meta[CREDENTIAL_META_KEY] not in refused.content[0].text  # type: ignore[union-attr]


async def test_a_source_started_before_the_key_pair_accepts_credentials_once_it_exists(
    settings: SourceSettings, server_for: Callable[..., MCPServer], tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    world = world_path(settings.data_dir, settings.seed)
    world_path(data_dir, settings.seed).symlink_to(world, target_is_directory=True)
    bare = dataclasses.replace(settings, data_dir=data_dir, signing_key_pem=None, public_key_pem=None)
    server = server_for("customers", settings=bare)  # no key pair yet: it cannot verify anything

    early = await call(
        server, "customer_lookup", RESTRICTED, credential("customers:restricted", source="customers")
    )
    assert wire(early)["errorCategory"] == "permission" and "no public key yet" in wire(early)["description"]

    coordinator_key = bare.signing_key()  # the coordinator's first need makes the pair in the data folder
    token = issue_credential(coordinator_key, "research-agent", ["customers:restricted"], source="customers")
    served = await call(server, "customer_lookup", RESTRICTED, {CREDENTIAL_META_KEY: token})
    assert served.is_error is False and wire(served)["results"][0]["id"] == "CUST-00001"


# --- key files ---------------------------------------------------------------------------------


def test_a_data_folder_first_made_for_the_traces_is_private_too(tmp_path: Path) -> None:
    """A command configures its tracing before it needs a key: the folders that makes are 0700 as well."""
    from traces.files import file_exporter

    data_dir = tmp_path / "fresh" / "data"
    file_exporter(data_dir / "traces", "research-coordinator").shutdown()
    for folder in (tmp_path / "fresh", data_dir, data_dir / "traces"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    SourceSettings(data_dir=data_dir).signing_key()
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700


def test_the_key_pair_is_private_from_the_start(tmp_path: Path) -> None:
    data_dir = tmp_path / "nested" / "data"
    key = SourceSettings(data_dir=data_dir).signing_key()
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((data_dir / PRIVATE_KEY_FILE).stat().st_mode) == 0o600
    public_mode = stat.S_IMODE((data_dir / PUBLIC_KEY_FILE).stat().st_mode)
    assert not public_mode & (stat.S_IWGRP | stat.S_IWOTH)
    assert "PRIVATE KEY" not in (data_dir / PUBLIC_KEY_FILE).read_text()
    public = read_public_key(data_dir)
    assert public is not None and public_pem(public) == public_pem(key)
    assert public_pem(SourceSettings(data_dir=data_dir).signing_key()) == public_pem(key)  # made once
    assert sorted(path.name for path in data_dir.iterdir()) == [
        PRIVATE_KEY_FILE,
        PUBLIC_KEY_FILE,
    ]  # no drafts


def test_an_existing_data_folder_is_made_private(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    SourceSettings(data_dir=tmp_path).signing_key()
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700  # made so: what others could open there leaks
    for name in (PRIVATE_KEY_FILE, PUBLIC_KEY_FILE):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def test_a_private_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    settings = SourceSettings(data_dir=tmp_path)
    settings.signing_key()
    path = tmp_path / PRIVATE_KEY_FILE
    path.chmod(0o644)
    with pytest.raises(ValueError) as refused:
        settings.signing_key()
    message = str(refused.value)
    assert str(path) in message and "mode 0644" in message and f"chmod 600 {path}" in message
    assert "PRIVATE KEY" not in message


def test_a_public_key_file_others_can_write_is_refused(tmp_path: Path) -> None:
    ensure_key_pair(tmp_path)
    path = tmp_path / PUBLIC_KEY_FILE
    path.chmod(0o666)
    with pytest.raises(ValueError, match=f"mode 0666.*chmod 644 {path}"):
        read_public_key(tmp_path)
    ensure_key_pair(tmp_path)  # the coordinator writes it again, whole and safe
    assert read_public_key(tmp_path) is not None


def test_a_configured_key_that_is_not_an_ed25519_pem_is_refused(tmp_path: Path) -> None:
    old_style = SourceSettings(data_dir=tmp_path, signing_key_pem="test-signing-key-" + "0" * 48)
    with pytest.raises(ValueError, match=f"{SIGNING_KEY_ENV} must hold an unencrypted Ed25519 private key"):
        old_style.signing_key()


def test_threads_making_the_pair_at_once_all_end_with_the_same_key(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    count = 16
    start = threading.Barrier(count)
    keys: list[str] = []
    errors: list[BaseException] = []

    def make() -> None:
        start.wait()
        try:
            keys.append(public_pem(ensure_key_pair(data_dir)))
        except BaseException as exc:  # collected, then asserted on in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == [] and len(keys) == count and len(set(keys)) == 1
    assert public_pem(ensure_key_pair(data_dir)) == keys[0]
    assert (data_dir / PUBLIC_KEY_FILE).read_text().strip() == keys[0].strip()


@pytest.mark.subprocess
def test_processes_making_the_pair_at_once_all_end_with_the_same_key(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    go = time.time() + 1.5  # each process imports, then waits for the same instant
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from sources.security.keys import ensure_key_pair, public_pem\n"
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time()))\n"
        "print(public_pem(ensure_key_pair(Path(sys.argv[1]))), end='')\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(data_dir), str(go)],
            cwd=PROJECT_ROOT,
            env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outputs = [process.communicate(timeout=60) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _, err in outputs]
    keys = {out for out, _ in outputs}
    assert len(keys) == 1 and "PUBLIC KEY" in next(iter(keys))
    assert stat.S_IMODE((data_dir / PRIVATE_KEY_FILE).stat().st_mode) == 0o600
