"""Where a source listens, and which Host and Origin it answers there.

By default a source listens on 127.0.0.1 and answers only a loopback Host and Origin (the SDK's own
defaults for a loopback server: DNS rebinding). A fleet a cluster reaches listens on one address the
user chooses (``research sources up --host 10.0.0.5``); it then answers a Host naming that address as
well as loopback's, and nothing else: a page that rebinds a name of its own to the address still
sends its own name as Host, and is refused. Never every interface (``0.0.0.0``, ``::``): the Host
check needs the one address the fleet is reached at, and a source on every interface would be on
networks nobody chose.
"""

from __future__ import annotations

import functools
import ipaddress

from mcp.server.transport_security import TransportSecuritySettings

__all__ = ["LOOPBACK", "checked_address", "http_base", "is_loopback", "transport_security"]

LOOPBACK = "127.0.0.1"
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def checked_address(host: str) -> str:
    """``host`` as a source may listen on it: one IP address, not every interface; ``ValueError`` in one line."""
    try:
        address = ipaddress.ip_address(host.strip())
    except ValueError:
        raise ValueError(
            f"--host must be one IP address of this machine, e.g. 10.0.0.5 or 127.0.0.1; got {host!r}"
        ) from None
    if address.is_unspecified:
        raise ValueError(
            f"--host {host} would listen on every interface; give the one address the cluster reaches, e.g. 10.0.0.5"
        )
    return str(address)


def is_loopback(host: str) -> bool:
    return ipaddress.ip_address(host).is_loopback


def http_base(host: str, port: int) -> str:
    """``http://HOST:PORT``, an IPv6 address in brackets."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


@functools.cache
def transport_security(host: str = LOOPBACK) -> TransportSecuritySettings:
    """The SDK's request checks for a server on ``host``: a POST of JSON only, the Host a loopback
    name or ``host``, an Origin (if sent) the same."""
    shown = f"[{host}]" if ":" in host else host
    names = _LOOPBACK_NAMES if is_loopback(host) else (*_LOOPBACK_NAMES, shown)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"http://{name}:*" for name in names],
    )
