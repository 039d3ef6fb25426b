"""The listening TCP sockets of processes, as the kernel reports them (psutil), and which are not on loopback:
the check that a server cutover starts serves this host only."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN of the process and its children (a JVM a CLI starts, a
    PostgreSQL's backends); the address as the kernel has it (an IPv4 address mapped in IPv6 unwrapped)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return set()
    found = set()
    for proc in procs:
        try:
            sockets = proc.net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        found |= {(_unmapped(s.laddr.ip), int(s.laddr.port)) for s in sockets if s.status == psutil.CONN_LISTEN}
    return found


def _unmapped(ip: str) -> str:
    address = ipaddress.ip_address(ip)
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(mapped or address)


def exposed(pids: Mapping[str, int]) -> dict[str, list[str]]:
    """Per named process, its listening sockets that are not on loopback (127.0.0.0/8, ::1): none expected."""
    out = {}
    for name, pid in pids.items():
        wide = sorted(f"{ip}:{port}" for ip, port in listening(pid) if not ipaddress.ip_address(ip).is_loopback)
        if wide:
            out[name] = wide
    return out


def serving(folder: Path, *parts: str) -> dict[str, int]:
    """The sandbox's running servers whose place in its state starts with one of `parts` (every one when none
    is given), each part found and each server checked to listen somewhere: a PID that serves nothing would
    prove nothing."""
    pids = {name: pid for name, pid in sandbox_pids(folder).items() if name.startswith(parts or ("",))}
    missing = [part for part in parts if not any(name.startswith(part) for name in pids)]
    quiet = [name for name, pid in pids.items() if not listening(pid)]
    assert not missing and not quiet, f"not running: {missing}; listening nowhere: {quiet}; found: {pids}"
    return pids


def sandbox_pids(folder: Path) -> dict[str, int]:
    """Every process a sandbox's state file names (brokers, ZooKeeper, catalog and storage servers, Connect,
    the registries), by where the state keeps its PID, that is running."""
    state = json.loads((folder / "state.json").read_text())
    return {where: pid for where, pid in _pids(state, "") if psutil.pid_exists(pid)}


def _pids(node: Any, where: str) -> Iterator[tuple[str, int]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pid" and isinstance(value, int):
                yield where, value
            else:
                yield from _pids(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _pids(value, f"{where}[{i}]")
