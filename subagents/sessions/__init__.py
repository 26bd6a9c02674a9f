"""The live and the recorded sides of ``subagents.transport``: MCP sessions (connection), a forked
source's stdio over a socket (forked_transport), faults injected client-side (client_faults), every
answer kept (recording) and answered again (replaying)."""
