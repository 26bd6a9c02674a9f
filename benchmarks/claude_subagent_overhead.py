"""Claude mode's own cost: a subagent's tool loop with the code's recovery under it, against the
anthropic SDK's MCP helpers used bare on the same session, same run.

One warm stdio source (orders) and a scripted Messages API on 127.0.0.1 that answers at once (the
tests' own), so what is measured is the code, not a model: each round is two model turns and one
tool call. The baseline is ``tool_runner`` with ``async_mcp_tool`` over the bare mcp ``Client``; the
measured path is ``run_subagent`` in Claude mode (the ``ModelCaller``, ``settle``, hooks, breaker,
classification, decisions, tokens). Alternating rounds, so machine noise falls on both alike.

    .venv/bin/python benchmarks/claude_subagent_overhead.py [--rounds 100]

Prints the medians and the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from anthropic.lib.tools.mcp import async_mcp_tool

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sources.settings import SourceSettings  # noqa: E402
from subagents.broker import CredentialBroker  # noqa: E402
from subagents.claude import ClaudeSettings, TokenBudget  # noqa: E402
from subagents.model_use import ClaudeReport  # noqa: E402
from subagents.sessions.connection import Connections, stdio_target  # noqa: E402
from subagents.subagent import Runtime, Task, run_subagent  # noqa: E402
from subagents.tool_loop import ClaudeSubagents  # noqa: E402
from tests.fake_messages_api import Conversations, FakeMessagesApi  # noqa: E402

ARGUMENTS = {"customer_id": "CUST-00042"}


async def measure(
    settings: SourceSettings, claude: ClaudeSettings, rounds: int
) -> tuple[list[float], list[float]]:
    bare: list[float] = []
    ours: list[float] = []
    async with (
        Connections.opened({"orders": stdio_target("orders", settings)}) as connections,
        claude.client() as client,
    ):
        runtime = Runtime(
            connections=connections,
            broker=CredentialBroker(settings.signing_key()),
            model=ClaudeSubagents(claude, client, TokenBudget(10**12)),
        )
        session, _ = await connections["orders"].session()
        tools = (await session.list_tools()).tools
        planned = json.dumps({"tool": "search_orders", "arguments": ARGUMENTS})

        async def bare_round() -> None:
            runner = client.beta.messages.tool_runner(
                model=claude.model, max_tokens=claude.max_tokens, thread=False,
                system="Task id: bare.", messages=[{"role": "user", "content": f"Planned call: {planned}"}],
                tools=[async_mcp_tool(tool, session) for tool in tools],  # type: ignore[arg-type]
            )  # fmt: skip
            await runner.until_done()

        async def our_round() -> None:
            task = Task("orders", "orders", "search_orders", ARGUMENTS)
            report = await run_subagent(task, runtime, deadline=runtime.clock.now() + 30)
            assert isinstance(report, ClaudeReport) and report.state == "ok" and report.model.turns == 2, (
                report
            )

        for _ in range(5):
            await bare_round()
            await our_round()
        for _ in range(rounds):
            for run_round, samples in ((bare_round, bare), (our_round, ours)):
                started = time.perf_counter()
                await run_round()
                samples.append(time.perf_counter() - started)
    return bare, ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    rounds = parser.parse_args().rounds
    api = FakeMessagesApi(Conversations())
    try:
        claude = ClaudeSettings(api_key="benchmark", base_url=api.base_url, max_retries=0)
        with tempfile.TemporaryDirectory() as data_dir:
            settings = SourceSettings(data_dir=Path(data_dir))
            bare, ours = anyio.run(measure, settings, claude, rounds)
    finally:
        api.close()
    bare_p50, ours_p50 = statistics.median(bare), statistics.median(ours)
    print(f"SDK helpers over the bare mcp client: p50 {bare_p50 * 1000:.2f} ms per loop (2 turns, 1 call)")
    print(f"Claude-mode subagent (recovery under the model): p50 {ours_p50 * 1000:.2f} ms per loop")
    print(f"ratio: {ours_p50 / bare_p50:.2f}, {rounds} rounds each")


if __name__ == "__main__":
    main()
