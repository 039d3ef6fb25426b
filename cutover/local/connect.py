"""The sandbox's Kafka Connect worker: Apache Kafka's distributed Connect runtime with Apache
Iceberg's sink connector on its class path (jvm.ICEBERG_CONNECT), the old pipeline as the field
runs it; and Apicurio Registry's AvroConverter (jvm.APICURIO_CONNECT), for topics in Confluent's
Avro wire format against a registry (`sink_config(..., avro_registry=URL)`).

One worker, on one cluster at a time, as a Connect cluster is: its configuration, offsets and
status live in three topics of the Kafka cluster it runs on (`connect-configs`, `connect-offsets`,
`connect-status`, created by the worker at the broker's default replication). Moving it to the
other cluster is what an operator does in a migration: stop the worker, point `bootstrap.servers`
elsewhere, start it, and create the connectors there again. Connectors are created, paused and
deleted through its REST listener (cutover.kafka.connect) on 127.0.0.1.

The Iceberg sink reads the worker's own properties file (named last on the JVM's command line)
for the Kafka settings of its control-topic clients, so the cluster's security settings are
written there once, at the top level, and again for the tasks' consumers and producers and the
sink's admin client (`consumer.`, `producer.`, `admin.`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutover import jvm
from cutover.lake.catalog import S3_COMPAT_ENV
from cutover.local import broker
from cutover.plan.model import Catalog

#: The Connect cluster's group (its workers' group, not a connector's consumer group).
WORKER_GROUP = "cutover-connect"
INTERNAL_TOPICS = ("connect-configs", "connect-offsets", "connect-status")
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
SINK_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
METADATA_TRANSFORM = "org.apache.iceberg.connect.transforms.KafkaMetadataTransform"
AVRO_CONVERTER = "io.apicurio.registry.utils.converter.AvroConverter"
READY_TIMEOUT = 120.0


@dataclass(frozen=True)
class ConnectSpec:
    folder: Path
    port: int
    #: The sandbox cluster it runs on: "old" or "new".
    cluster: str
    version: str = jvm.KAFKA_VERSION
    #: The Connect cluster's group and its config, offsets and status topics.
    group: str = WORKER_GROUP
    topics: tuple[str, str, str] = INTERNAL_TOPICS

    @property
    def title(self) -> str:
        return f"Kafka Connect worker (on {self.cluster})"

    @property
    def config_file(self) -> Path:
        return self.folder / "worker.properties"

    @property
    def log_file(self) -> Path:
        return self.folder / "connect.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def worker_properties(spec: ConnectSpec, client: dict[str, str]) -> dict[str, str]:
    """The worker's settings; `client` is the cluster's Java client properties (bootstrap first)."""
    props = {
        **client,
        "group.id": spec.group,
        "config.storage.topic": spec.topics[0],
        "offset.storage.topic": spec.topics[1],
        "status.storage.topic": spec.topics[2],
        # the broker's default replication (3 on a three-broker sandbox cluster, else 1)
        "config.storage.replication.factor": "-1",
        "offset.storage.replication.factor": "-1",
        "status.storage.replication.factor": "-1",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "listeners": spec.url,
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(spec.port),
        # the sink's connector consumer commits through its own transactions; the framework's
        # periodic offset commit only matters to other sinks
        "offset.flush.interval.ms": "1000",
        # a worker that crashed leaves its groups within seconds, not the 45 s default: its restart's
        # tasks get their partitions back at once
        "session.timeout.ms": "10000",
        "consumer.session.timeout.ms": "10000",
        # every plugin is on the class path, each with its ServiceLoader manifest: no reflective scan of
        # the class path (seconds at each start, with the AWS bundle on it)
        "plugin.discovery": "service_load",
        # the data topics are written in transactions by the mirror: a sink never reads an aborted one
        "consumer.isolation.level": "read_committed",
    }
    for prefix in ("consumer.", "producer.", "admin."):
        props.update({f"{prefix}{k}": v for k, v in client.items() if k != "bootstrap.servers"})
    return props


def command(spec: ConnectSpec, client: dict[str, str],
            plugins: tuple[jvm.JarSet, ...] = (jvm.ICEBERG_CONNECT, jvm.APICURIO_CONNECT)) -> list[str]:
    """The worker's command line, its properties file written (private: it may hold a password)."""
    spec.folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(spec.config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(jvm.properties_text(worker_properties(spec, client)))
    classpath = ":".join(str(j) for s in plugins for j in jvm.resolve(s))
    return [jvm.java(), "-Xms128m", "-Xmx768m", *jvm.LEAN, "-cp", classpath, MAIN_CLASS, str(spec.config_file)]


def start(spec: ConnectSpec, client: dict[str, str]) -> int:
    """Start the worker on its cluster; the PID once its REST listener answers."""
    cmd = command(spec, client)
    # S3-compatible storage (the sandbox's s3proxy) takes no checksums of the AWS SDK's newer default
    env = {**os.environ, **S3_COMPAT_ENV}
    return broker.start_command(spec, cmd, env, lambda log: "Kafka Connect started" in log, READY_TIMEOUT)


def stop(spec: ConnectSpec, pid: int | None, kill: bool = False) -> bool:
    """Stop the worker (SIGTERM: its tasks stop and leave their groups); kill=True is a crash."""
    return broker.stop(spec, pid, kill)


def apicurio_api(url: str) -> str:
    """An Apicurio 2.x registry's native API (…/apis/registry/v2), the one its serdes call, from its
    Confluent-compatible URL (…/apis/ccompat/v7, what `cutover local status` shows), its native
    URL, or its base URL."""
    base = url.rstrip("/")
    for suffix in ("/apis/registry/v2", "/apis/ccompat/v7", "/apis/ccompat/v6"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return f"{base}/apis/registry/v2"


def avro_converter(registry_url: str, prefix: str = "value.converter") -> dict[str, str]:
    """Connector settings for Apicurio's AvroConverter reading Confluent's Avro wire format (magic
    byte 0, the schema's 4-byte id, the Avro body) with the writer schema fetched by that id from the
    Apicurio registry at `registry_url` (see apicurio_api). The id a Confluent client registers and
    frames through Apicurio's Confluent API is the schema's content id, so the converter looks content
    ids up, takes no Apicurio headers, and registers nothing. The 4-byte id handler is named rather than
    set with `apicurio.registry.as-confluent=true`, which does the same but warns of a duplicate id handler
    (the default one) at each start."""
    return {
        prefix: AVRO_CONVERTER,
        f"{prefix}.apicurio.registry.url": apicurio_api(registry_url),
        f"{prefix}.apicurio.registry.id-handler": "io.apicurio.registry.serde.Legacy4ByteIdHandler",
        f"{prefix}.apicurio.registry.use-id": "contentId",
        f"{prefix}.apicurio.registry.headers.enabled": "false",
        f"{prefix}.apicurio.registry.auto-register": "false",
    }


def sink_config(catalog: Catalog, topics: list[str], table: str, *, control_topic: str = "control-iceberg",
                commit_interval_ms: int = 2000, tasks: int = 1, metadata: bool = True,
                schemas: bool = False, avro_registry: str | None = None, **extra: str) -> dict[str, str]:
    """An Iceberg sink connector's configuration writing `table` of the sandbox's catalog.

    JSON records (`schemas`: with the JsonConverter's schema envelope; else schemaless, the
    table's columns from the record's fields), or with `avro_registry` (an Apicurio registry's URL)
    Avro values in Confluent's wire format (avro_converter); the table created on the first record
    and evolved with new fields; with `metadata`, Iceberg's KafkaMetadataTransform adds each
    record's topic, partition, offset and timestamp as flat columns `_kafka_metadata_*`.
    """
    from cutover.lake.catalog import java_properties

    config: dict[str, Any] = {
        "connector.class": SINK_CLASS,
        "tasks.max": tasks,
        "topics": ",".join(topics),
        "iceberg.tables": table,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.catalog": catalog.name,
        **{f"iceberg.catalog.{k}": v for k, v in java_properties(catalog).items()},
        "iceberg.control.topic": control_topic,
        "iceberg.control.commit.interval-ms": commit_interval_ms,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": str(schemas).lower(),
    }
    if avro_registry is not None:
        del config["value.converter.schemas.enable"]
        config.update(avro_converter(avro_registry))
    if metadata:
        config.update({"transforms": "kafka", "transforms.kafka.type": METADATA_TRANSFORM,
                       "transforms.kafka.nested": "false"})
    config.update(extra)
    return {k: str(v) for k, v in config.items()}
