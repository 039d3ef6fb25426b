"""Where a part of cutover serves its metrics: the address rule (this host only unless told) and the endpoint a
command's options and the plan's observability section choose, each half remembered by what chose it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: Where metrics are served when neither the command nor the plan names an address: this host only. A
#: migration's state (topics, groups, lag, the switch's phase) is not for every network the host is on.
LOOPBACK = "127.0.0.1"
_HOST_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                        r"[A-Za-z0-9])?)*\.?")


def host_problem(host: str) -> tuple[str, str] | None:
    """Why `host` cannot be an address to serve on (an IP address or a host name, nothing around it), and the
    address it should be; None when it can."""
    import ipaddress

    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if _HOST_NAME.fullmatch(host):
        return None
    if "://" in host:
        bare = host.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]") or LOOPBACK
        return f"{host!r} is a URL: give the address alone", bare
    if host.startswith("[") and host.endswith("]"):
        return f"{host!r} is an IPv6 address in brackets: give it without them", host[1:-1]
    address, _, port = host.rpartition(":")
    if port.isdigit() and address and host_problem(address.strip("[]")) is None:
        return f"{host!r} holds a port: give the address alone (the port is given on its own)", address.strip("[]")
    return f"{host!r} is neither an IP address nor a host name", f"{LOOPBACK} (this host only) or 0.0.0.0 (every " \
                                                                   "interface)"


@dataclass(frozen=True)
class Endpoint:
    """Where a part serves its metrics, and what chose each half (named when it cannot be served there)."""

    host: str
    port: int
    #: the command's option (`--metrics-port`) or the plan's key (`observability.ports.mirror`)
    port_from: str
    #: the command's option, the plan's key, or None: the default (127.0.0.1)
    host_from: str | None
    #: the command's own port and host options, for a fix
    options: tuple[str, str]
    #: the plan the keys are in
    plan_file: Path

    def said(self, key: str, value: object) -> str:
        """How the user gave `value`: `--port 9420`, or `observability.ports.exporter: 9420 (in plan.yaml)`."""
        return f"{key} {value}" if key.startswith("-") else f"{key}: {value} (in {self.plan_file})"
