"""Loopback ports for the sandbox's servers: chosen below the kernel's ephemeral range, never twice."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from cutover.errors import SandboxError

_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on, below the kernel's ephemeral range: a port the kernel hands out
    for outgoing connections (a broker's own client connections, say) could be taken between this choice
    and the server's start; one below that range is only ever taken by an explicit bind. Never the same
    port twice in one process."""
    low = _ephemeral_low()
    for _ in range(200):
        port = random.randrange(10000, low) if low > 11000 else 0
        if port in _handed_out:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen = int(s.getsockname()[1])
        if chosen not in _handed_out:
            _handed_out.add(chosen)
            return chosen
    raise SandboxError("no free loopback port found below the ephemeral range",
                       fix="stop processes that hold many local ports, then try again")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
