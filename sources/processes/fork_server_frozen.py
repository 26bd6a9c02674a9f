"""Imported by the fork server of ``sources.processes.forked`` alone, last on its preload list: what the
fork server has loaded is moved out of the garbage collector's sight (``gc.freeze``), and collection,
held off while it loaded (``fork_server_unswept``), resumes.

A forked source shares the fork server's memory until it writes to it. The first full collection in
a child walks every object it inherited (some 100,000: the mcp SDK, pydantic's models, the sources)
and writes to each one's header, which copies nearly every page of the heap: 60 to 70 ms of CPU per
child before it answered its first request, five children at once on two cores. Frozen objects are
never collected, never walked: what the sources imported stays for the life of the process anyway.
This is what the ``gc.freeze`` documentation recommends for a process that forks without exec.
"""

from sources.processes import collector

collector.started_up()
