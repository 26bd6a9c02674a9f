"""The `research` command line, one module per command group.

research plan "refund 45 quid on ORD-10031?"
research ask "Investigate jane.doe@example.com: recent orders, open tickets, and whether a £750 refund on ORD-10023 is allowed"
research task customers customer_lookup '{"identifier": " Jane.Doe@Example.com "}'
research sources list | add | remove | check | call | up | status | down
research traces list | show latest
research chaos kill | heal | hang | slow | flaky | garbage | run
research compare --scenarios 200 --seed 1 --plot compare.png
research replay latest
research batch questions.jsonl --out runs/tonight --engine ray
"""

import os
import sys

from coordinator.cli.started import STARTED_AT  # first: before anything else is imported

# pydantic looks for its plugins (observability hooks any installed distribution may declare) as it
# builds its first model, reading every distribution's entry points: 35 to 50 ms here, in this process
# and again in the sources' fork server, which inherits this. The command line loads none, unless
# PYDANTIC_DISABLE_PLUGINS is set already: set to "" it loads every plugin installed.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

# isort: split
# Second: `research ask` over stdio starts its sources' fork server before its own imports, and holds
# off the garbage collector while it loads (``sources.processes.collector``; `ask` resumes it).
from coordinator.cli.head_start import start_sources_early
from sources.processes import collector

if start_sources_early(sys.argv):
    collector.hold_off()

# isort: split
# After the head start on purpose; importing a command module registers its commands: the command
# the command line names, alone, or every one (``coordinator.cli.command_modules``).
from coordinator.cli.command_modules import load_commands
from coordinator.cli.common import app

load_commands(sys.argv)

__all__ = ["STARTED_AT", "app"]
