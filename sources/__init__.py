"""The five MCP source servers, the error contract they speak, and what they share."""

import os
import sys

# A stdio source whose spawner asks for it (``SourceSettings.child_environment`` does) exits as soon
# as its client hangs up, even while the rest of the source is still importing: see sources.processes.lifeline.
# Only a source run as ``python -m sources.NAME`` (argv[0] is "-m" while its package imports): any
# other program that imports the sources with that environment (a `research` command a test or a
# script starts with it) reads its stdin as it likes.
if os.environ.get("RESEARCH_LIFELINE") == "stdin" and sys.argv[:1] == ["-m"] and "--http" not in sys.argv:
    from sources.processes.lifeline import exit_when_stdin_hangs_up

    exit_when_stdin_hangs_up()
