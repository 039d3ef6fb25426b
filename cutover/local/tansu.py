"""Tansu as a sandbox cluster: a second Kafka implementation (Rust, Apache-2.0, crates.io `tansu`).

`cutover local up --platform new=tansu` runs it as the new cluster: one broker on 127.0.0.1 (Tansu
listens on every interface unless told), its log in a SQLite file in the sandbox folder (the libsql
engine: kept across stop and start, purged with the sandbox). The binary is built once per machine
by `scripts/tansu` into ~/.cutover/tansu-<version> (about half an hour on two cores).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cutover.errors import DependencyMissing, UsageError
from cutover.jvm import cutover_home
from cutover.local import broker
from cutover.plan import ClusterSide

VERSION = "0.6.0"
#: The sandbox's platforms: Apache Kafka (the default), or Tansu.
PLATFORMS = ("kafka", "tansu")


def binary(version: str = VERSION) -> Path:
    """The tansu executable: CUTOVER_TANSU if set, else the one scripts/tansu built."""
    given = os.environ.get("CUTOVER_TANSU")
    return Path(given) if given else cutover_home() / f"tansu-{version}" / "bin" / "tansu"


def require(version: str = VERSION) -> Path:
    """The binary, or a clear error saying how to build it (before anything is written)."""
    path = binary(version)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise DependencyMissing(f"Tansu {version} is not built on this machine (looked for {path})",
                                fix="run scripts/tansu once (it builds Tansu from crates.io with cargo, about "
                                    "half an hour on two cores), or set CUTOVER_TANSU to a tansu binary")
    return path


@dataclass(frozen=True)
class TansuSpec:
    """One Tansu broker of the sandbox: its folder, port and cluster id (broker.Process)."""

    side: str
    folder: Path
    port: int
    cluster_id: str
    version: str = VERSION

    @property
    def title(self) -> str:
        return f"{self.side} cluster (Tansu {self.version})"

    @property
    def config_file(self) -> Path:
        """The broker's storage, named on its command line relative to its folder, where it runs (Tansu takes
        sqlite:///abs/path for a path under its working folder): with the folder, what tells this process."""
        return self.folder / "tansu.db"

    @property
    def log_file(self) -> Path:
        return self.folder / "tansu.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        url = f"tcp://127.0.0.1:{self.port}"
        return [str(require(self.version)), "broker", "--cluster-id", self.cluster_id, "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", f"sqlite://{self.config_file.name}"]


def start(spec: TansuSpec) -> int:
    """Start the broker in its own session (no .env of the folder read: an empty environment file);
    its PID once it accepts connections."""
    spec.folder.mkdir(parents=True, exist_ok=True)
    (spec.folder / ".env").touch()  # Tansu reads .env from its working folder: ours is empty
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LISTENER_URL", "ADVERTISED_LISTENER_URL",
                                                                    "STORAGE_ENGINE", "CLUSTER_ID"))}
    env.setdefault("RUST_LOG", "warn")
    return broker.start_command(spec, spec.command(), env, _ready)


def _ready(log: str) -> bool:
    """Tansu says nothing when it serves: accepting connections is the sign (wait_ready checks it)."""
    return True


def name(platform: str, version: str) -> str:
    """How status and errors name a cluster's implementation: 'Kafka 4.1.1', 'Tansu 0.6.0'."""
    return f"Tansu {version}" if platform == "tansu" else f"Kafka {version}"


def check_options(platforms: Mapping[ClusterSide, str], security: Mapping[ClusterSide, broker.Security],
                  versions: Mapping[ClusterSide, str], sizes: Mapping[ClusterSide, int],
                  modes: Mapping[ClusterSide, str]) -> None:
    """A Tansu cluster is one plaintext broker of the Tansu release cutover knows; the binary must be
    built (scripts/tansu) before anything is written."""
    for side, platform in platforms.items():
        if platform not in PLATFORMS:
            raise UsageError(f"--platform {side}={platform}: the sandbox runs {' or '.join(PLATFORMS)}",
                             fix=f"use --platform {side}=tansu, or leave it out for Apache Kafka")
        if platform != "tansu":
            continue
        clash = [f"--{o} {side}={v}" for o, v in (("security", security.get(side, "plaintext")),
                                                  ("kafka-version", versions.get(side)),
                                                  ("brokers", sizes.get(side, 1)), ("metadata", modes.get(side)))
                 if v is not None and v not in ("plaintext", 1)]
        if clash:
            raise UsageError(f"--platform {side}=tansu runs one plaintext Tansu broker: {', '.join(clash)} "
                             "is for Apache Kafka", fix=f"leave {', '.join(clash)} out")
        require()
