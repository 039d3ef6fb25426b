"""One ZooKeeper server for an old cluster in ZooKeeper mode (Kafka 3.9, the last release
with it): configure, start, wait, stop, and the SCRAM users that must be in ZooKeeper
before the first broker starts.

ZooKeeper 3.8 comes in the Kafka 3.9 jar set. Like a broker, the server is identified by
its folder: stopping checks that the PID still runs our zoo.cfg.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutover.errors import SandboxError
from cutover.local import broker

#: The Kafka release that still runs on ZooKeeper (4.0 removed it).
ZOOKEEPER_KAFKA_VERSION = "3.9.1"
READY_TIMEOUT = 60.0


@dataclass(frozen=True)
class ZooKeeperSpec:
    name: str
    folder: Path
    port: int
    version: str = ZOOKEEPER_KAFKA_VERSION

    @property
    def label(self) -> str:
        return f"{self.name} ZooKeeper"

    @property
    def title(self) -> str:
        return self.label

    @property
    def config_file(self) -> Path:
        return self.folder / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        return self.folder / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"


def render_config(spec: ZooKeeperSpec) -> str:
    return "\n".join([
        f"dataDir={spec.folder / 'data'}",
        f"clientPort={spec.port}",
        "clientPortAddress=127.0.0.1",
        "tickTime=2000",
        "maxClientCnxns=0",
        "admin.enableServer=false",
    ]) + "\n"


def start(spec: ZooKeeperSpec) -> int:
    """Start the server in its own session; return its PID once it serves."""
    spec.folder.mkdir(parents=True, exist_ok=True)
    spec.config_file.write_text(render_config(spec))
    return broker.start_processes([spec], "org.apache.zookeeper.server.ZooKeeperServerMain", serving,
                                  READY_TIMEOUT)[0]


def serving(log: str) -> bool:
    """Whether these ZooKeeper log lines say it serves requests (bound, database loaded)."""
    return "PrepRequestProcessor (sid:0) started" in log


def add_scram_users(spec: ZooKeeperSpec, users: dict[str, str]) -> None:
    """Write SCRAM-SHA-256 credentials into ZooKeeper (the brokers need theirs to start)."""
    for user, password in users.items():
        done = subprocess.run(
            broker.jvm_cmd(spec.version, "kafka.admin.ConfigCommand", "--zookeeper", spec.connect, "--alter",
                           "--add-config", f"SCRAM-SHA-256=[password={password}]", "--entity-type", "users",
                           "--entity-name", user),
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            output = (done.stdout[-800:] + done.stderr[-800:]).replace(password, "***")
            raise SandboxError(f"adding the SCRAM user {user} to the {spec.label} failed:\n{output}",
                               fix="cutover local down --purge, then up again")


def describe(spec: ZooKeeperSpec, node: Any) -> dict[str, Any]:
    """The server in `cutover local status`: where it listens, whether it runs, its PID and log."""
    alive = broker.running(spec, node.pid)
    return {"connect": spec.connect, "running": alive, "pid": node.pid if alive else None, "log": str(spec.log_file)}
