"""The five MCP source servers, the error contract they speak, and what they share."""

import os
import sys

# A stdio source whose spawner asks for it (``SourceSettings.child_environment`` does) exits as soon
# as its client hangs up, even while the rest of the source is still importing: see sources.lifeline.
if os.environ.get("RESEARCH_LIFELINE") == "stdin" and "--http" not in sys.argv:
    from sources.lifeline import exit_when_stdin_hangs_up

    exit_when_stdin_hangs_up()
