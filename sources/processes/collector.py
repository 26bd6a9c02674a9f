"""The garbage collector kept out of a process's start-up.

Starting up, a process imports the mcp SDK, pydantic's models and OpenTelemetry: a few hundred
thousand objects that live as long as the process, none of them garbage. The collector still ran
some 290 times meanwhile in `research ask`, twice over everything loaded so far (its oldest
generation): 125 to 230 ms of the coordinator's CPU in three runs on a shared machine, and 60 to
200 ms in the fork server's, on the way to a story query's answer in about a second. ``hold_off``
stops it while a process loads; ``started_up`` then moves what was loaded out of its sight for good
(``gc.freeze``, as the ``gc`` documentation advises for a process that forks, or that loads once and
then works) and lets it collect what the process makes from then on.
"""

from __future__ import annotations

import gc

__all__ = ["hold_off", "started_up"]


def hold_off() -> None:
    """No collection until ``started_up``: call it before the process's imports."""
    gc.disable()


def started_up() -> None:
    """What the process has loaded stays for its life: frozen, and collection resumes for the rest."""
    gc.freeze()
    gc.enable()
