"""What a call may do to the world, and who asked for it: the facts the write rules are decided on.

* ``ToolEffects``: what a tool says it does, from its MCP annotations. Where a server says nothing,
  the specification's defaults hold: a tool may write, destructively, and is not idempotent. So a
  tool is safe to send again only when it says it only reads, or that the same call twice has no
  additional effect (``idempotentHint``), or when it takes an idempotency key and the call carries one.
* ``EffectsTable``: each source's tools' effects, as their servers list them; a tool not in it
  gets the defaults, so what is not known is treated as a write.
* ``AskedWrite``: one write a question asks for, as the question reader understood it (an action,
  on the thing it names positively, within the amount it says).
* ``Approval``: a person's yes to a write, given up front (``--approve issue_refund:ORD-10031``) or at
  a prompt.

The rules that use these live in ``subagents.recovery`` (what is resent) and ``subagents.hooks``
(what is sent at all).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sources.catalogue import input_schemas, tool_annotations
from sources.identifiers import CUSTOMER_ID, ORDER_ID

__all__ = ["IDEMPOTENCY_KEY", "Approval", "AskedWrite", "EffectsTable", "ToolEffects"]

# The argument that makes a write safe to repeat where a tool takes it (the contract's refunds do).
IDEMPOTENCY_KEY = "idempotency_key"


@dataclass(frozen=True)
class ToolEffects:
    """What a tool says it does (MCP ``ToolAnnotations``); the defaults are the specification's."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    takes_key: bool = False  # its input schema has an ``idempotency_key``

    @classmethod
    def of(
        cls, annotations: Mapping[str, Any] | None, input_schema: Mapping[str, Any] | None = None
    ) -> ToolEffects:
        """From a tool's annotations as listed on the wire (camelCase) and its input schema."""
        said = dict(annotations or {})
        properties = (input_schema or {}).get("properties") or {}
        return cls(
            read_only=said.get("readOnlyHint") is True,
            destructive=said.get("destructiveHint") is not False,
            idempotent=said.get("idempotentHint") is True,
            takes_key=isinstance(properties, Mapping) and IDEMPOTENCY_KEY in properties,
        )

    def resendable(self, arguments: Mapping[str, Any]) -> bool:
        """Whether sending this call again can repeat no effect: a read, an idempotent tool, or a
        call carrying the idempotency key its tool takes."""
        keyed = (
            self.takes_key
            and isinstance(arguments.get(IDEMPOTENCY_KEY), str)
            and bool(arguments[IDEMPOTENCY_KEY])
        )
        return self.read_only or self.idempotent or keyed

    @property
    def writes(self) -> bool:
        return not self.read_only


UNKNOWN = ToolEffects()  # a tool nobody listed: the specification's defaults, a write


@dataclass(frozen=True)
class EffectsTable:
    """Each source's tools' effects; a tool not listed is a write, not idempotent."""

    tools: Mapping[str, Mapping[str, ToolEffects]] = field(default_factory=dict)

    def of(self, source: str, tool: str) -> ToolEffects:
        return self.tools.get(source, {}).get(tool, UNKNOWN)

    def joined(self, other: Mapping[str, Mapping[str, ToolEffects]]) -> EffectsTable:
        return EffectsTable({**self.tools, **other})

    @classmethod
    def demo(cls) -> EffectsTable:
        """The five demo sources' tools, as their servers annotate them (``sources/annotations.json``)."""
        return _demo()


@functools.cache
def _demo() -> EffectsTable:
    """Read once: the files are the sources' own, and a table is never changed in place."""
    schemas = input_schemas()
    return EffectsTable(
        {
            source: {
                tool: ToolEffects.of(said, schemas.get(source, {}).get(tool)) for tool, said in tools.items()
            }
            for source, tools in tool_annotations().items()
        }
    )


@dataclass(frozen=True)
class AskedWrite:
    """One write a question asks for: the tool, what it acts on, and at most how much.

    ``target``: the id it acts on (an order), as the question names it positively; None when the
    tool is asked for without one. ``amount``: the most it may move, in pounds; with ``full`` the
    order's paid amount (billing's to say), and ``amount`` None. ``asked``: the words that asked it.
    """

    tool: str
    target: str | None = None
    amount: float | None = None
    full: bool = False
    asked: str = ""
    exact: str | None = None  # the one call allowed, by value: a task run by name asks for its own call

    @classmethod
    def exactly(cls, tool: str, arguments: Mapping[str, Any], asked: str = "") -> AskedWrite:
        return cls(tool, asked=asked, exact=_by_value(arguments))

    def allows(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """Whether a call of ``tool`` with ``arguments`` is this write (on its target, within its amount)."""
        if tool != self.tool:
            return False
        if self.exact is not None:
            return _by_value(arguments) == self.exact
        if self.target is not None and not acts_on(self.target, arguments):
            return False
        if self.amount is None:
            return True
        amount = arguments.get("amount")
        return (
            isinstance(amount, int | float)
            and not isinstance(amount, bool)
            and math.isfinite(amount)
            and amount <= self.amount + 1e-9
        )

    def describe(self) -> str:
        if self.exact is not None:
            return f"{self.tool}({self.exact})"
        what = f"{self.tool} on {self.target}" if self.target else self.tool
        if self.full:
            return f"{what}, the order's paid amount"
        return f"{what}, at most £{self.amount:,.2f}" if self.amount is not None else what


@dataclass(frozen=True)
class Approval:
    """A person's yes to calls of ``tool`` (on ``target``, where given): ``TOOL`` or ``TOOL:ID``; or,
    given at a prompt that showed the whole call, to that call alone (``exact``)."""

    tool: str
    target: str | None = None
    by: str = "--approve"  # how it was given: the flag, a prompt
    exact: str | None = None  # the one call approved, by value

    @classmethod
    def of_call(cls, tool: str, arguments: Mapping[str, Any], by: str) -> Approval:
        return cls(tool, by=by, exact=_by_value(arguments))

    @classmethod
    def parse(cls, text: str) -> Approval:
        """``issue_refund:ORD-10031`` or ``issue_refund``; raises ValueError naming the form."""
        tool, _, target = text.strip().partition(":")
        if not tool.strip() or (_ and not target.strip()):
            raise ValueError(f"expected TOOL or TOOL:ID, such as issue_refund:ORD-10031; got {text!r}")
        return cls(tool.strip(), target.strip() or None)

    def covers(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        if tool != self.tool:
            return False
        if self.exact is not None:
            return _by_value(arguments) == self.exact
        return self.target is None or acts_on(self.target, arguments)

    def __str__(self) -> str:
        if self.exact is not None:
            return f"{self.tool}({self.exact})"
        return f"{self.tool}:{self.target}" if self.target else self.tool


def _by_value(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), sort_keys=True, default=str)


def acts_on(target: str, arguments: Mapping[str, Any]) -> bool:
    """Whether a call with ``arguments`` acts on ``target`` and on nothing else: it names the target, and
    no other order or customer. Its idempotency key is no target: a key written as "ORD-10031" on a
    refund of ORD-10134 does not make it a refund of ORD-10031."""
    named = {value for name, value in arguments.items() if name != IDEMPOTENCY_KEY and isinstance(value, str)}
    others = {
        value for value in named - {target} if ORDER_ID.is_canonical(value) or CUSTOMER_ID.is_canonical(value)
    }
    return target in named and not others
