"""The subagents' ``Runtime``, assembled in one place for every caller in the coordinator.

A query (``coordinator.research``), one task (`research task`) and a chaos scenario's side refund
(``coordinator.chaos.runner``) all run subagents; ``build_runtime`` gives each the same assembly:
the refund guard around every call, the fleet guard (breakers, retry budget, bulkheads), a seeded jitter, a clock, an observer, a model.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from subagents.broker import CredentialBroker
from subagents.classify import CONTRACT, Classifier
from subagents.connection import Connections
from subagents.guard import Guard, LocalGuard
from subagents.hooks import AllowedTools, PostCallHook, PreCallHook, TrimResults, refund_guard
from subagents.policy import RecoveryPolicy
from subagents.subagent import Clock, ModelDriver, MonotonicClock, Observer, Runtime, SilentObserver

__all__ = ["build_runtime"]


def build_runtime(
    connections: Connections,
    broker: CredentialBroker,
    *,
    policy: RecoveryPolicy | None = None,
    guard: Guard | None = None,
    seed: int | None = None,
    pre_call: Sequence[PreCallHook] | None = None,
    post_call: Sequence[PostCallHook] | None = None,
    clock: Clock | None = None,
    observer: Observer | None = None,
    model: ModelDriver | None = None,
    classifier: Classifier = CONTRACT,
    allowed_tools: Mapping[str, frozenset[str]] | None = None,
) -> Runtime:
    """The runtime one run's subagents share.

    ``pre_call`` None: the refund guard (``refund_guard``): its limit checks every call before it
    leaves, and its ledger, first among the post-call hooks, remembers what billing says of each
    order's refunds during this run, so a refund a subagent already knows would break a per-order rule
    is not even sent. Given hooks replace the guard (a chaos test passes a broken one to see it caught).
    ``post_call`` None: ``TrimResults`` alone (after the guard's ledger).
    ``guard`` None: breakers of this run's own, no retry budget, no bulkhead. ``seed``: the back-off jitter's; None draws a fresh one.
    ``allowed_tools``: the tools calls to each registered source may use (``AllowedTools``), checked
    before every call, after the refund guard.
    """
    if post_call is None:
        post_call = (TrimResults(),)
    if pre_call is None:
        refund_limit, refund_ledger = refund_guard()
        pre_call, post_call = (refund_limit,), (refund_ledger, *post_call)
    if allowed_tools:
        pre_call = (*pre_call, AllowedTools(allowed_tools))
    return Runtime(
        connections=connections,
        broker=broker,
        policy=policy if policy is not None else RecoveryPolicy(),
        guard=guard if guard is not None else LocalGuard(),
        pre_call=tuple(pre_call),
        post_call=tuple(post_call),
        clock=clock if clock is not None else MonotonicClock(),
        rng=random.Random(seed),  # noqa: S311  (back-off jitter, not cryptography)
        observer=observer if observer is not None else SilentObserver(),
        model=model,
        classifier=classifier,
    )
