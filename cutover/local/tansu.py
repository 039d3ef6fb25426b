"""Tansu as a sandbox cluster: a second Kafka implementation (Rust, Apache-2.0, crates.io `tansu`).

`cutover local up --platform new=tansu` runs it as the new cluster: one broker on 127.0.0.1 (Tansu
listens on every interface unless told), its log in a SQLite file in the sandbox folder (the libsql
engine: kept across stop and start, purged with the sandbox). The binary is built once per machine
by `scripts/tansu` into ~/.cutover/tansu-<version> (about half an hour on two cores).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutover.errors import DependencyMissing, UsageError
from cutover.jvm import cutover_home
from cutover.local import broker, lake
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


#: The Iceberg namespace Tansu writes its topics' tables into (Tansu's own default).
NAMESPACE = "tansu"


#: JSON Schema types of the plan's column types (tables[].schema) Tansu validates values against.
_JSON_TYPES = {"long": "integer", "int": "integer", "string": "string", "double": "number", "float": "number",
               "boolean": "boolean"}


def write_schema(folder: Path, topic: str, columns: list[dict[str, Any]]) -> Path:
    """Write the schema Tansu reads for `topic` (`schemas/<topic>.json` in its folder): each record's key a JSON string,
    its value an object of these columns (a plan's `schema` entries). The key needs a schema too: Tansu writes every
    record's key into its table, and refuses the record when the schema gives the key no field id."""
    unknown = [c["type"] for c in columns if c["type"] not in _JSON_TYPES]
    if unknown:
        raise UsageError(f"column type(s) {', '.join(unknown)} have no JSON Schema type here",
                         fix=f"use {', '.join(_JSON_TYPES)}")
    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {
        "type": "object", "properties": {c["name"]: {"type": _JSON_TYPES[c["type"]]} for c in columns}}}}
    path = folder / "schemas" / f"{topic}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema, indent=2) + "\n")
    return path


@dataclass(frozen=True)
class TableTopics:
    """Tansu's Iceberg sink ("Table Topic"): every topic written as an Iceberg table `tansu.<topic>` through the
    sandbox's REST catalog, onto its S3 storage. Tansu then needs a schema for every topic (a file
    `schemas/<topic>.json`, `.avsc` or `.proto` in its folder) and refuses the records of a topic without one."""

    catalog: str
    storage: str
    #: The storage's keys and region, given to Tansu in its environment (AWS_*), never on its command line.
    env: Mapping[str, str]

    @classmethod
    def over(cls, catalog: str, storage: str, secrets: Mapping[str, str]) -> TableTopics:
        """Through the sandbox's REST catalog at `catalog`, onto its S3 storage at `storage` (keys from `secrets`)."""
        return cls(catalog, storage, {"AWS_ACCESS_KEY_ID": secrets[lake.ACCESS_KEY_VAR],
                                      "AWS_SECRET_ACCESS_KEY": secrets[lake.SECRET_KEY_VAR],
                                      "AWS_DEFAULT_REGION": lake.REGION, "AWS_REGION": lake.REGION})


def mirror_keys(platforms: Mapping[str, str], catalog: str | None) -> dict[str, str]:
    """The sandbox plan's mirror keys for its clusters' `platforms`: a Tansu cluster has no transactions, so the
    mirror writes idempotently; with Tansu's Iceberg sink on (a REST catalog) every topic on the new cluster needs
    a schema, so the mirror keeps its state on the old cluster."""
    if "tansu" not in platforms.values():
        return {}
    return {"mode": "idempotent", **({"state_cluster": "old"} if platforms.get("new") == "tansu" and catalog == "rest"
                                     else {})}


@dataclass(frozen=True)
class TansuSpec:
    """One Tansu broker of the sandbox: its folder, port and cluster id (broker.Process)."""

    side: str
    folder: Path
    port: int
    cluster_id: str
    version: str = VERSION
    lake: TableTopics | None = None

    @property
    def schemas(self) -> Path:
        """Where Tansu reads each topic's schema (Table Topics): `<topic>.json`, `.avsc` or `.proto`."""
        return self.folder / "schemas"

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
        cmd = [str(require(self.version)), "broker", "--cluster-id", self.cluster_id, "--listener-url", url,
               "--advertised-listener-url", url, "--storage-engine", f"sqlite://{self.config_file.name}"]
        if self.lake is not None:  # relative to its folder, like the storage (see config_file)
            cmd += ["--schema-registry", f"file://{self.schemas.name}", "iceberg", "--location",
                    "s3://warehouse/tansu", "--catalog", self.lake.catalog, "--namespace", NAMESPACE]
        return cmd


def start(spec: TansuSpec) -> int:
    """Start the broker in its own session (no .env of the folder read: an empty environment file);
    its PID once it accepts connections."""
    spec.folder.mkdir(parents=True, exist_ok=True)
    (spec.folder / ".env").touch()  # Tansu reads .env from its working folder: ours is empty
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LISTENER_URL", "ADVERTISED_LISTENER_URL",
                                                                    "STORAGE_ENGINE", "CLUSTER_ID", "AWS_",
                                                                    "SCHEMA_REGISTRY", "ICEBERG_", "DATA_LAKE"))}
    if spec.lake is not None:
        spec.schemas.mkdir(exist_ok=True)
        env.update({**spec.lake.env, "AWS_ENDPOINT": spec.lake.storage, "AWS_ALLOW_HTTP": "true"})
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
