"""The bearer credential a coordinator sends on every HTTP request to a demo source: for that source
alone, with no scope of its own, signed again once half its life is gone (the clock injected)."""

from __future__ import annotations

import time

import httpx2
import pytest

from sources.security.auth import MAX_CREDENTIAL_LIFETIME_S, CredentialRejected, verify_credential
from subagents.sessions.bearer import BearerCredential
from tests.conftest import TEST_KEY


def test_one_credential_per_source_until_half_its_life_is_gone() -> None:
    now = [time.time()]
    credential = BearerCredential(TEST_KEY, "orders", clock=lambda: now[0])
    first = credential.token()
    principal = verify_credential(TEST_KEY.public_key(), first, source="orders")
    assert principal.scopes == frozenset()  # a call's scopes travel in its _meta, which wins
    with pytest.raises(CredentialRejected):  # for orders alone
        verify_credential(TEST_KEY.public_key(), first, source="billing")
    now[0] += MAX_CREDENTIAL_LIFETIME_S / 2 - 1
    assert credential.token() == first  # known to the source: verified once, not per request
    now[0] += 2
    assert credential.token() != first  # never one about to expire


def test_every_request_carries_it() -> None:
    credential = BearerCredential(TEST_KEY, "kb")
    request = httpx2.Request("POST", "http://10.0.0.5:8105/mcp")
    sent = next(credential.auth_flow(request))
    assert sent.headers["Authorization"] == f"Bearer {credential.token()}"
