"""The subagents' ``Runtime``, assembled in one place for every caller in the coordinator.

A query (``coordinator.research``: ask, batch, compare, the service, the Ray worker), one task
(`research task`) and a chaos scenario's side refund (``coordinator.chaos.runner``) all run
subagents; ``build_runtime`` gives each the same assembly: the refund guard, the write guard (a
write only as the question asked it: that action, on what it names positively, within its amount,
once), the approvals a person gave, what each tool says it does (what may be resent), the
registered sources' allowed tools, the fleet guard (breakers, retry budget, bulkheads), a seeded
jitter, a clock, an observer, a model. What a caller must say (the registry, the data folder, the
writes asked, the approvals) has no default, so no entry point can leave a guard out.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from coordinator.registered_tools import allowed_tools, tool_effects
from coordinator.registry import Registry
from sources.refund_rules import refund_guard
from subagents.broker import CredentialBroker
from subagents.classify import CONTRACT, Classifier
from subagents.guard import Guard, LocalGuard
from subagents.hooks import (
    AllowedTools,
    LeftOut,
    PostCallHook,
    PreCallHook,
    TrimResults,
    write_guard,
)
from subagents.policy import RecoveryPolicy
from subagents.subagent import Clock, ModelDriver, MonotonicClock, Observer, Runtime, SilentObserver
from subagents.transport import Transport
from subagents.writes import Approval, AskedWrite

__all__ = ["build_runtime"]


def build_runtime(
    connections: Transport,
    broker: CredentialBroker,
    *,
    registry: Registry,
    data_dir: Path,
    asked: Sequence[AskedWrite],
    approvals: Sequence[Approval],
    left_out: Mapping[str, str] | None = None,
    policy: RecoveryPolicy | None = None,
    guard: Guard | None = None,
    seed: int | None = None,
    pre_call: Sequence[PreCallHook] | None = None,
    post_call: Sequence[PostCallHook] | None = None,
    clock: Clock | None = None,
    observer: Observer | None = None,
    model: ModelDriver | None = None,
    classifier: Classifier = CONTRACT,
    jitter: Callable[[str], random.Random] | None = None,
) -> Runtime:
    """The runtime one run's subagents share.

    ``pre_call`` None: the refund guard (``refund_guard``): its limit checks every call before it
    leaves, and its ledger, first among the post-call hooks, remembers what billing says of each
    order's refunds during this run, so a refund a subagent already knows would break a per-order rule
    is not even sent. Given hooks replace the refund guard (a chaos test passes a broken one to see
    billing catch it); the others stay.
    Always: the write guard (``write_guard``): a write only as one of ``asked`` (the question's, or
    a task's own call), once each, and only with one of ``approvals``; what each tool says it does
    (reads and idempotent tools are resent after a transient failure, a write is not); the tools
    each registered source may be called with (``AllowedTools``, as kept in ``data_dir``). With
    ``left_out`` (the records the question names only to leave out, ``LeftOut``): no call names them.
    ``post_call`` None: ``TrimResults`` alone (after the guards' listeners).
    ``guard`` None: breakers of this run's own, no retry budget, no bulkhead. ``seed``: the back-off
    jitter's; None draws a fresh one.
    """
    effects = tool_effects(registry, data_dir)
    writes, sent = write_guard(asked, effects)
    listeners: tuple[PostCallHook, ...] = (sent,)
    if pre_call is None:
        refund_limit, refund_ledger = refund_guard()
        pre_call, listeners = (refund_limit,), (refund_ledger, *listeners)
    return Runtime(
        connections=connections,
        broker=broker,
        policy=policy if policy is not None else RecoveryPolicy(),
        guard=guard if guard is not None else LocalGuard(),
        pre_call=_pre_call(pre_call, allowed_tools(registry, data_dir), left_out, writes),
        post_call=(*listeners, *(post_call if post_call is not None else (TrimResults(),))),
        clock=clock if clock is not None else MonotonicClock(),
        rng=random.Random(seed),  # noqa: S311  (back-off jitter, not cryptography)
        observer=observer if observer is not None else SilentObserver(),
        model=model,
        classifier=classifier,
        jitter=jitter,
        effects=effects,
        approvals=tuple(approvals),
    )


def _pre_call(
    given: Sequence[PreCallHook],
    allowed: Mapping[str, frozenset[str]],
    left_out: Mapping[str, str] | None,
    writes: PreCallHook,
) -> tuple[PreCallHook, ...]:
    """The pre-call hooks in the order they judge a call: ``given`` (the refund limit), a tool research
    may not call at all (named as such first), a record the question leaves out, then whether the
    question asked for the call."""
    restricted: tuple[PreCallHook, ...] = (AllowedTools(allowed),) if allowed else ()
    return (*given, *restricted, *((LeftOut(left_out),) if left_out else ()), writes)
