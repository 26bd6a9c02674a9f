"""Each source setting's default, read by ``sources.settings`` and by the variables of ``sources.environment``."""

SEED = 42  # of the generated demo data
KB_WARMUP_MS = 1000
TICKETS_RATE_PER_SECOND = 5.0
TICKETS_BURST = 10
# A coordinator opens a session per source per query and closes it within the query's deadline
# (30 s by default); a batch of N workers holds about N. Five idle minutes outlast any of them and
# a person pausing at a prompt, yet a client that died frees its session in minutes, not the SDK's
# default half hour; a thousand sessions (about 40 MB) are far beyond one machine's workers.
HTTP_SESSION_IDLE_S = 300.0
HTTP_MAX_SESSIONS = 1000
