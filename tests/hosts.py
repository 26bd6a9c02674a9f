"""Two hosts on this machine: two network namespaces joined by a veth pair, as two machines by a cable.

Each namespace has its own loopback, one end of the pair and one address of a /30 of 10.231.0.0/16
(a private range this machine's own network does not use: checked before the namespaces are made);
``cut`` sets host B's end down, a cable pulled out: B's processes live on, and reach nothing of A.
Everything is undone on the way out, on failure too: the namespaces deleted (which deletes the pair).
Made with ``ip`` (iproute2) as root; where that cannot be done a test skips and says why
(``two_hosts``), a benchmark says so (``joined_hosts`` raises ``HostsUnavailable``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

__all__ = [
    "Host",
    "HostsUnavailable",
    "TwoHosts",
    "joined_hosts",
    "namespaces_left",
    "two_hosts",
    "unavailable",
]

RANGE = ipaddress.IPv4Network("10.231.0.0/16")
RAY_PERSPECTIVE = "8.8.8.8/32"  # ray._private.services.node_ip_address_from_perspective's default
_IP_S = 10.0


@dataclass(frozen=True)
class Host:
    name: str  # the namespace's, as `ip netns` knows it
    address: str  # its end of the pair
    link: str  # its end of the pair's interface name

    @property
    def prefix(self) -> list[str]:
        """Runs a program on this host: ``nsenter`` execs in place, so the program keeps the pid it is started with."""
        return [_tool("nsenter"), f"--net=/run/netns/{self.name}", "--"]


@dataclass(frozen=True)
class TwoHosts:
    a: Host
    b: Host

    def addresses(self) -> set[str]:
        return {self.a.address, self.b.address}

    def links(self) -> set[str]:
        return {self.a.link, self.b.link}

    def cut(self, host: Host) -> None:
        """The host's cable pulled out: its end of the pair down."""
        _ip("-n", host.name, "link", "set", host.link, "down")


class HostsUnavailable(RuntimeError):
    """Two hosts cannot be made here; the message says why."""


def _ip(*args: str) -> str:
    done = subprocess.run([_tool("ip"), *args], capture_output=True, text=True, timeout=_IP_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _tool(name: str) -> str:
    return shutil.which(name) or name


def _unused_network() -> ipaddress.IPv4Network:
    """A /30 of RANGE, when nothing of this machine's own network is in RANGE."""
    routes = _ip("-4", "route", "show", "table", "all") + _ip("-4", "addr")
    for word in routes.split():
        with contextlib.suppress(ValueError):
            if ipaddress.ip_network(word, strict=False).overlaps(RANGE):
                raise HostsUnavailable(f"{RANGE} is in use on this machine ({word}); the hosts need it free")
    chosen = secrets.randbelow(RANGE.num_addresses // 4)
    return ipaddress.IPv4Network(f"{RANGE.network_address + chosen * 4}/30")


def unavailable() -> str | None:
    """Why two hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root: two hosts are made where this runs as root"
    if shutil.which("ip") is None or shutil.which("nsenter") is None:
        return "network namespaces need `ip` (iproute2) and `nsenter` (util-linux)"
    return None


@contextlib.contextmanager
def two_hosts() -> Iterator[TwoHosts]:
    """``joined_hosts`` for a test: skipped, saying why, where they cannot be made."""
    why = unavailable()
    if why is not None:
        pytest.skip(why)
    with joined_hosts() as hosts:
        yield hosts


@contextlib.contextmanager
def joined_hosts() -> Iterator[TwoHosts]:
    """Host A and host B, joined; loopback up in both. Deleted on the way out, whatever happened."""
    why = unavailable()
    if why is not None:
        raise HostsUnavailable(why)
    network = _unused_network()
    first, second = list(network.hosts())
    tag = secrets.token_hex(3)
    a = Host(f"rc-a-{tag}", str(first), f"rca{tag}")
    b = Host(f"rc-b-{tag}", str(second), f"rcb{tag}")
    made: list[str] = []
    try:
        for host in (a, b):
            _ip("netns", "add", host.name)
            made.append(host.name)
            _ip("-n", host.name, "link", "set", "lo", "up")
        _ip("-n", a.name, "link", "add", a.link, "type", "veth", "peer", "name", b.link, "netns", b.name)
        for host in (a, b):
            _ip("-n", host.name, "addr", "add", f"{host.address}/{network.prefixlen}", "dev", host.link)
            _ip("-n", host.name, "link", "set", host.link, "up")
            # Ray finds a process's node address by the route to 8.8.8.8 (a UDP socket "connected" to
            # 8.8.8.8:53 and closed: no packet sent); without one it takes loopback's, which no node of
            # these hosts has. A route to that one address only, not a default route: with one, Ray's
            # agents' DNS lookups went out over the pair towards the machine's nameserver (the socket
            # check caught them); without, they fail at once, and nothing tries to leave.
            _ip("-n", host.name, "route", "add", RAY_PERSPECTIVE, "dev", host.link)
        yield TwoHosts(a, b)
    finally:
        for name in made:  # the pair goes with them
            with contextlib.suppress(RuntimeError):
                _ip("netns", "delete", name)


def namespaces_left(hosts: TwoHosts) -> list[str]:
    """Of the two hosts' namespaces, those still there."""
    listed = _ip("netns", "list")
    return [host.name for host in (hosts.a, hosts.b) if host.name in listed]
