"""The instant the command started (``time.monotonic``), taken as the package loads, before any command
module is imported: a command's deadline counts from here, so start-up counts too."""

import time

STARTED_AT = time.monotonic()
