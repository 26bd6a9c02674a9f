"""Imported by the fork server of ``sources.processes.forked`` alone, first on its preload list: no garbage
collection while it imports what the sources need (``sources.processes.collector``); the last module
on the list, ``fork_server_frozen``, freezes what was loaded and lets collection resume, so every
child forked from it collects what it makes itself."""

from sources.processes import collector

collector.hold_off()
