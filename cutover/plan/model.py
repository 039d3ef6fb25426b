"""The migration plan, as typed data. These dataclasses are also the plan's schema.

samples/plan.yaml documents every key; keep the two in step.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cutover.errors import UsageError
from cutover.plan.endpoint import LOOPBACK, Endpoint, host_problem
from cutover.plan.reader_kinds import reader_kind_problem
from cutover.plan.schema import Duration


def _regex(pattern: str) -> str | None:
    """A selection's pattern, compiled as the selection will; a bad one is named with the fix for its likely
    cause: a shell glob (`*.tmp`), or a character meant literally (`(`)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"{pattern!r} is not a valid regular expression: {exc} (fix: {_regex_fix(pattern, exc)})"
    return None


def _regex_fix(pattern: str, exc: re.error) -> str:
    if exc.msg in ("nothing to repeat", "multiple repeat") and ("*" in pattern or "?" in pattern):
        glob = "".join({"*": ".*", "?": "."}.get(c, re.escape(c)) for c in pattern)
        return f"patterns are regular expressions, not shell globs: write {glob}"
    return (f"to match it literally, escape it: {re.escape(pattern)}; patterns are Python regular expressions that "
            "match the whole name")


def _at_least(low: int, fix: str) -> Callable[[int], str | None]:
    """A check that a whole number is `low` or more, with its fix."""
    return lambda n: None if n >= low else f"must be {low} or more (fix: {fix})"


#: The fix of a gate on rows that differ.
NONE_ALLOWED = "0 or more; 0, the default, allows none"


def _one_of(value: str, choices: tuple[str, ...]) -> str | None:
    """A choice among words, with the close one as the fix."""
    if value in choices:
        return None
    close = difflib.get_close_matches(value, choices, n=1)
    return (f"must be {', '.join(choices[:-1])} or {choices[-1]} "
            f"(fix: {f'did you mean {close[0]}?' if close else f'{choices[0]}, the default'})")


#: The mirror's producer codecs (mirror.compression).
CODECS = ("auto", "none", "gzip", "snappy", "lz4", "zstd")
#: How the mirror writes (docs/guide/platforms.md): transactional, records and progress in one transaction
#: (exactly once, a second process fenced by the broker); idempotent, for targets without transactions.
MIRROR_MODES = ("transactional", "idempotent")


_TRANSFORM = re.compile(r"\s*(?:(?P<fn>\w+)\s*\((?P<args>[^()]*)\)|(?P<col>\w+))\s*")
#: partition transform as the plan spells it -> Iceberg's Spark DDL spelling
TRANSFORMS = {"year": "years", "years": "years", "month": "months", "months": "months", "day": "days",
              "days": "days", "date": "days", "hour": "hours", "hours": "hours", "bucket": "bucket",
              "truncate": "truncate", "identity": "identity"}
TRANSFORMS_FIX = "use a column, year(col), month(col), day(col), hour(col), bucket(N, col) or truncate(N, col)"


def transform(expr: str) -> tuple[str, list[str]] | None:
    """A partition_by entry as (transform, arguments): "" for a plain column; None when it is not one."""
    m = _TRANSFORM.fullmatch(expr)
    if m is None:
        return None
    fn = (m.group("fn") or "").lower()
    args = [a.strip() for a in (m.group("args") or m.group("col")).split(",")]
    width = 2 if fn in ("bucket", "truncate") else 1
    if (fn and fn not in TRANSFORMS) or len(args) != width or not re.fullmatch(r"\w+", args[-1]) \
            or (width == 2 and not args[0].isdigit()):
        return None
    return fn, args


def _transforms(exprs: list[str]) -> str | None:
    bad = [e for e in exprs if transform(e) is None]
    return f"{', '.join(repr(e) for e in bad)}: not a partition transform cutover knows (fix: {TRANSFORMS_FIX})" \
        if bad else None


_IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")


def _table_name(name: str) -> str | None:
    """namespace.table, each part a plain identifier: cutover names the table in Spark SQL, in Iceberg's
    procedures (which parse the name, unquoted) and in the dead-letter table's name."""
    parts = name.split(".")
    if len(parts) >= 2 and all(_IDENTIFIER.fullmatch(p) for p in parts):
        return None
    fixed = [p for p in (re.sub(r"[^A-Za-z0-9_]+", "_", p.strip()) for p in parts) if p.strip("_")]
    fixed = fixed if len(fixed) >= 2 else ["NAMESPACE", *(fixed or ["TABLE"])]
    return (f"{name!r} is not a table name cutover can use: namespace.table, each part letters, digits and _ "
            f"(fix: e.g. {'.'.join(fixed)})")


_CATALOG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _catalog_name(name: str) -> str | None:
    if _CATALOG_NAME.fullmatch(name):
        return None
    fixed = re.sub(r"[^A-Za-z0-9_-]+", "_", name.strip()).lstrip("-") or "lake"
    return (f"{name!r} cannot name a catalog: letters, digits, _ and -, starting with a letter or _ (it becomes "
            f"Spark's spark.sql.catalog.<name>) (fix: e.g. {fixed if _CATALOG_NAME.fullmatch(fixed) else 'lake'})")


#: A name that goes into ids and folder names: the plan's, a reader's.
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _as_word(name: str, default: str) -> str:
    """The name made a _WORD, for a fix."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64] or default


def _plan_name(name: str) -> str | None:
    """The name is part of transactional ids, group ids and the journal's folder: a safe word for all three."""
    if _WORD.fullmatch(name) and name not in (".", ".."):
        return None
    fixed = _as_word(name, "migration")
    return (f"'{name}' cannot name a plan: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter "
            f"or digit (it becomes part of Kafka transactional and group ids and of a folder name) (fix: e.g. {fixed})")


_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _topic_name(name: str) -> str | None:
    """Kafka's own rule for a topic's name: a table pair's topic that breaks it can never exist."""
    if _TOPIC.fullmatch(name) and name not in (".", ".."):
        return None
    fixed = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip())[:249].strip(".") or "TOPIC"
    return (f"{name!r} is not a Kafka topic name: 1 to 249 letters, digits, '.', '_' or '-' (fix: e.g. {fixed}, "
            "the topic's name as the old cluster lists it)")


@dataclass(frozen=True)
class Selection:
    """Names selected by regular expressions (full match): included and not excluded."""

    #: Regular expressions (each matching the whole name) of the names selected.
    include: list[str] = field(default_factory=lambda: [".*"], metadata={"each": _regex})
    #: Regular expressions of names left out, even when an include matches them.
    exclude: list[str] = field(default_factory=list, metadata={"each": _regex})

    def matches(self, name: str) -> bool:
        return any(re.fullmatch(p, name) for p in self.include) and not any(
            re.fullmatch(p, name) for p in self.exclude
        )

    def select(self, names: list[str]) -> list[str]:
        return sorted(n for n in names if self.matches(n))


_COLUMN_TYPE = re.compile(r"string|long|int|double|float|boolean|timestamp|date|binary|decimal\(\d+,\s*\d+\)")


@dataclass(frozen=True)
class Column:
    #: The column's name in the new table.
    name: str
    #: string, long, int, double, float, boolean, timestamp, date, binary, decimal(p,s)
    type: str = field(metadata={"check": lambda t: None if _COLUMN_TYPE.fullmatch(t) else
                                f"unknown column type '{t}' (fix: use string, long, int, double, float, "
                                "boolean, timestamp, date, binary or decimal(p,s))"})
    #: Whether the column may hold null.
    nullable: bool = True



@dataclass(frozen=True)
class OffsetColumns:
    """Names of the Kafka metadata columns in the old table, when it has them."""

    #: The old table's column with the record's Kafka partition.
    partition: str
    #: The old table's column with the record's Kafka offset.
    offset: str
    #: The old table's column with the record's topic, when it holds several topics.
    topic: str | None = None
    #: The record's Kafka timestamp, when the old writer keeps it (Iceberg's Kafka Connect sink with its
    #: KafkaMetadataTransform: _kafka_metadata_timestamp): Kafka metadata, not payload, to verify.
    timestamp: str | None = None


@dataclass(frozen=True)
class TablePair:
    #: The Kafka topic whose records both tables hold.
    topic: str = field(metadata={"check": _topic_name})
    #: The existing pipeline's table, namespace.table (each part letters, digits and _).
    old: str = field(metadata={"check": _table_name, "fix": "name the existing pipeline's table, namespace.table"})
    #: The table cutover shadow writes, namespace.table (each part letters, digits and _).
    new: str = field(metadata={"check": _table_name, "fix": "name the table cutover shadow writes, namespace.table"})
    #: json (decoded into columns), raw (the value as bytes), text (the value as a UTF-8 string), or a
    #: schema-registry format in the Confluent wire format (0x00, a 4-byte schema id, the body): avro,
    #: protobuf or json-schema, decoded with the writer schema the plan's registry holds under that id.
    format: Literal["json", "raw", "text", "avro", "protobuf", "json-schema"] = "json"
    #: The record key: raw (kept as bytes in kafka_key only), or avro, protobuf or json-schema (also decoded
    #: into a `key` column, a struct).
    key_format: Literal["raw", "avro", "protobuf", "json-schema"] = "raw"
    #: avro: a field a record's writer schema lacks (added or dropped by another version) reads as its
    #: default, Avro's own resolution ("default"), or as null ("null": what a pipeline that decodes each
    #: record with its own writer schema writes, such as Iceberg's Kafka Connect sink with Apicurio's
    #: AvroConverter; choose what the old table holds, or verify finds the difference).
    missing_fields: Literal["default", "null"] = "default"
    #: For json: the payload columns. Absent: inferred from a sample of the topic.
    schema: list[Column] | None = None
    #: Iceberg partition transforms over columns, e.g. "day(timestamp)", "bucket(16, key)".
    partition_by: list[str] = field(default_factory=list, metadata={"check": _transforms})
    old_offset_columns: OffsetColumns | None = None
    #: Columns that identify a row, for reconciling an old table without offset columns.
    key: list[str] = field(default_factory=list)
    #: great-expectations suites (files in checks/) run against both tables.
    checks: list[str] = field(default_factory=list)
    #: Columns whose type may be narrower in the new table (a double stored as a float, a long as an
    #: int, a decimal with fewer digits): verify fails on any other narrowing, which can lose data.
    allow_narrowing: list[str] = field(default_factory=list)
    #: Who writes the new table: shadow (cutover shadow, the default), or the new cluster's platform itself
    #: (Table Topic style): tansu (Tansu's Iceberg sink; a JSON schema per topic). A platform's table is
    #: read, never written, by cutover: verify compares it by `key` (else content) and partition, not
    #: offsets, which it does not keep (cutover/lake/platforms.py).
    new_writer: Literal["shadow", "tansu"] = "shadow"
    #: A record that cannot be decoded: dead-letter (to <new table>_dead_letter) or fail the shadow.
    on_bad_record: Literal["dead-letter", "fail"] = "dead-letter"
    #: New fields in JSON records: evolve (add nullable columns), fail, or dead-letter.
    schema_drift: Literal["evolve", "fail", "dead-letter"] = "evolve"
    #: Where promote reads the old writer's last committed source offsets at the hand-over:
    #: "columns" (max offset per partition in old_offset_columns), "group" (writer_group on old), or
    #: "iceberg-connect" (Apache Iceberg's Kafka Connect sink writes the table: its connector's consumer
    #: group, checked against the control-topic offsets in the table's snapshots; cutover.switch.sink).
    #: With iceberg-connect the same connector goes on writing the table from the new cluster.
    writer_offsets: Literal["columns", "group", "iceberg-connect"] = "columns"
    #: The old writer's consumer group, for writer_offsets: group (for iceberg-connect, the sink's
    #: iceberg.connect.group-id when it is set; default connect-<connector>).
    writer_group: str | None = None
    #: iceberg-connect: the sink connector's name (its consumer group is connect-<name>).
    connector: str | None = None
    #: iceberg-connect: the sink's iceberg.control.topic.
    control_topic: str = "control-iceberg"
    #: iceberg-connect: the REST address of the Connect cluster that runs the connector (http://host:port);
    #: with it, the hand-over checks the connector is paused or stopped, else that its group is empty.
    connect_url: str | None = None

    @property
    def sink_group(self) -> str:
        """iceberg-connect: the sink connector's consumer group."""
        return self.writer_group or f"connect-{self.connector}"

    def handover_problem(self) -> str | None:
        """Why promote could not find where the old writer stands (None when it can)."""
        if self.writer_offsets == "iceberg-connect" and not (self.connector or self.writer_group):
            return (f"table {self.old}: writer_offsets is iceberg-connect but neither connector (the sink "
                    "connector's name) nor writer_group (its iceberg.connect.group-id) is set")
        if self.writer_offsets == "columns" and self.old_offset_columns is None:
            return (f"table {self.old}: writer_offsets is columns but old_offset_columns is not set; set it, or "
                    "use writer_offsets: group with writer_group")
        if self.writer_offsets == "group" and not self.writer_group:
            return f"table {self.old}: writer_offsets is group but writer_group is not set"
        return None


#: What a catalog's uri looks like, for fixes.
CATALOG_URIS = ("sqlite:////absolute/path/catalog.db, postgresql+psycopg2://user@host/db or a REST catalog's "
                "http(s):// with type: rest")


@dataclass(frozen=True)
class Catalog:
    """One Iceberg catalog shared by pyiceberg and Spark (same name on both sides)."""

    uri: str = field(metadata={"fix": "e.g. sqlite:////abs/path/catalog.db or postgresql+psycopg2://host/db"})
    #: The catalog's name, for pyiceberg and as Spark's catalog (spark.sql.catalog.<name>): letters, digits, _ and -.
    name: str = field(default="cutover", metadata={"check": _catalog_name})
    #: sql (SQLite or PostgreSQL, Iceberg's JdbcCatalog) or rest (an Iceberg REST catalog).
    type: Literal["sql", "rest"] = "sql"
    #: The warehouse location (file:// or s3://) where new tables' files go.
    warehouse: str | None = None
    #: Where the tables' files live, for the storage probe (plan check, and before Spark starts);
    #: defaults to the warehouse. A REST catalog keeps its warehouse server-side: name it here.
    storage: str | None = None
    #: Catalog and storage properties in pyiceberg's names (S3 endpoint and keys), given to both sides.
    properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Spark:
    #: Spark's master: local[*], spark://host:7077, yarn, k8s://... A local master's driver listens on
    #: 127.0.0.1 (spark.driver.host and spark.driver.bindAddress in `conf` choose otherwise).
    master: str = "local[*]"
    #: Any Spark setting; wins over cutover's defaults.
    conf: dict[str, str] = field(default_factory=dict)
    #: The micro-batch interval of `cutover shadow --follow`.
    trigger_interval: Duration = Duration(10)
    #: Where `cutover shadow` keeps Spark's per-run checkpoints (the table holds the offsets).
    checkpoint_dir: str | None = None
    #: Kafka records per micro-batch, at most (per table).
    max_records_per_batch: int = field(default=200_000, metadata={"check": _at_least(1, "e.g. 200000, the default")})
    #: How long a shadow commit is retried while the catalog does not answer.
    commit_timeout: Duration = Duration(120)
    #: Start the driver from the class-data archive cutover keeps (made by `cutover local up`, once per
    #: Java, Spark and jars): about half the CPU of a session's start. False: the JVM's own class loading.
    class_archive: bool = True


@dataclass(frozen=True)
class Mirror:
    #: The replication factor of the topics the mirror creates on the new cluster.
    replication_factor: int = field(default=3, metadata={"check": _at_least(
        1, "the new cluster's replication factor, e.g. 3, the default (1 for a one-broker cluster)")})
    #: How often a running mirror translates and commits the selected groups' offsets.
    group_sync_interval: Duration = Duration(10)
    #: Prefix of the transactional ids and internal topics the mirror keeps on the new cluster.
    state_prefix: str = "__cutover"
    #: The codec the mirror's producer compresses with: auto (the one most copied topics name in
    #: compression.type, else lz4), none, gzip, snappy, lz4 or zstd.
    compression: str = field(default="auto", metadata={"check": lambda c: _one_of(c, CODECS)})
    #: transactional (the default): each batch of records and the mirror's progress in one transaction on the
    #: new cluster. idempotent: for a target without transactions (Tansu): idempotent writes, the progress
    #: written after the records it covers, and at a restart the records written past it found on the target,
    #: matched to the source by content and recorded, never written again (still exactly once; a second
    #: process for one shard is found at its next group sync, not fenced by the broker).
    mode: str = field(default="transactional", metadata={"check": lambda m: _one_of(m, MIRROR_MODES)})
    #: Which cluster keeps the forward mirror's state topics (offset map, progress): new (the default, its
    #: target), or old, for a target that cannot keep them (Tansu with its Iceberg sink refuses every record of
    #: a topic without a schema). old needs mode: idempotent (a transaction covers one cluster).
    state_cluster: str = field(default="new", metadata={"check": lambda c: _one_of(c, ("new", "old"))})


@dataclass(frozen=True)
class LagGate:
    """How far apart the two tables may be at verify: rows beyond the comparison window, per side."""

    #: Rows the old table holds beyond what the new table has reached: the new write path is behind,
    #: stalled or empty, and those rows were never compared.
    old_ahead: int = field(default=0, metadata={"check": _at_least(0, NONE_ALLOWED)})
    #: Rows the new table holds beyond the old table's position (null: no limit).
    new_ahead: int | None = field(default=None, metadata={"check": _at_least(
        0, "0 or more, or leave it out for no limit")})


@dataclass(frozen=True)
class Gates:
    #: Records per partition the forward mirror may be behind when promote starts (the drain copies the rest).
    max_mirror_lag: int = field(default=1000, metadata={"check": _at_least(
        0, "0 or more, e.g. 1000, the default: the drain copies the rest")})
    #: Promote needs a passing verify at most this old.
    verify_max_age: Duration = Duration(3600)
    #: Rows of the old table that the new one lacks, allowed before verify fails.
    max_missing_rows: int = field(default=0, metadata={"check": _at_least(0, NONE_ALLOWED)})
    #: Rows of the new table that the old one lacks, allowed before verify fails.
    max_extra_rows: int = field(default=0, metadata={"check": _at_least(0, NONE_ALLOWED)})
    #: Rows with the same offset but other content, allowed before verify fails.
    max_mismatched_rows: int = field(default=0, metadata={"check": _at_least(0, NONE_ALLOWED)})
    #: Offsets held more than once in a table, allowed before verify fails.
    max_duplicate_rows: int = field(default=0, metadata={"check": _at_least(0, NONE_ALLOWED)})
    #: Verify fails, and promote refuses, when one table is further ahead than this (offsets mode).
    max_lag_rows: LagGate = field(default_factory=LagGate)
    #: After the freeze, the old cluster's end offsets must stand still this long, unless the freeze_producers
    #: hook gave evidence (it returned in this run, and no transaction is open): then `quiet_confirm` is enough.
    quiet_period: Duration = Duration(10)
    #: With that evidence, how long the end offsets must stand still, counted from wait-quiet across the drain
    #: and the groups' sync (at most the quiet period). Set it to the quiet period to always wait the whole of it.
    quiet_confirm: Duration = Duration(1)
    #: `cutover assess`: a blocker when a table's writer (old pipeline or shadow) could be down for less than
    #: this before retention deletes records it has not written (from retention and the produce rate).
    min_replay_window: Duration = Duration(6 * 3600)
    #: `cutover assess`: how long after promote a rollback must stay possible; the old cluster's retention must
    #: keep what the reverse mirror carries back that long.
    rollback_window: Duration = Duration(24 * 3600)


HOOK_EVENTS = (
    "freeze_producers", "stop_consumers", "switch_clients", "stop_old_writer", "start_old_writer",
    "stop_new_writer", "start_new_writer", "stop_reader", "start_reader", "resume", "before_step", "after_step",
    "on_success", "on_failure",
)


@dataclass(frozen=True)
class Switch:
    """How promote and rollback run."""

    #: The journal and lock (relative to the plan). Put it on storage that outlives the operator's machine.
    journal_dir: str = ".cutover"
    #: While this file exists (relative to the plan), promote holds before freezing producers.
    postpone_file: str | None = None
    #: Start the reverse mirror (new to old) at promote, so rollback loses nothing.
    reverse_mirror: bool = True
    #: After the freeze: how long to wait for the quiet period before giving up.
    quiet_timeout: Duration = Duration(300)
    #: How long to wait for consumer groups to become empty after stop_consumers.
    groups_timeout: Duration = Duration(300)
    #: How long a hook may run.
    hook_timeout: Duration = Duration(600)


@dataclass(frozen=True)
class Complete:
    """What `cutover complete` removes of the shadow's leftovers once the migration is done (its state
    topics go unless --keep-state; cancel removes everything it created in the catalog regardless)."""

    #: Drop (and purge) each pair's new table, the shadow's copy that verify compared; the canonical
    #: (old) table goes on. Off by default: it is the evidence of the last verify.
    drop_new_tables: bool = False
    #: Drop (and purge) the dead-letter tables (<new table>_dead_letter): the records that could not be
    #: decoded. Off by default: look at them first.
    drop_dead_letter: bool = False
    #: Remove the cutover_* commit branches of stopped shadow runs from every table of the plan (a branch
    #: whose rows were published to main, or whose head is older than an hour; a live run's is kept).
    drop_branches: bool = True


def _hook_events(hooks: dict[str, str]) -> str | None:
    unknown = sorted(set(hooks) - set(HOOK_EVENTS))
    if unknown:
        close = [c for u in unknown for c in difflib.get_close_matches(u, HOOK_EVENTS, n=1)]
        return (f"unknown hook event(s) {', '.join(unknown)}; events are: {', '.join(HOOK_EVENTS)} (fix: "
                + (f"did you mean {', '.join(close)}?" if close else "name one of those events") + ")")
    return None


@dataclass(frozen=True)
class Routing:
    """The file clients read the active cluster's bootstrap servers from."""

    #: The routing file clients read the active cluster's bootstrap servers from (relative to the plan).
    file: str


@dataclass(frozen=True)
class Clusters:
    old: dict[str, str] = field(metadata={"fix": "the old cluster's client properties, at least bootstrap.servers"})
    new: dict[str, str] = field(metadata={"fix": "the new cluster's client properties, at least bootstrap.servers"})


REGISTRY_FORMATS = ("avro", "protobuf", "json-schema")


def _registry_url(props: dict[str, str]) -> str | None:
    url = props.get("url", "")
    if not url:
        return "'url' is required (fix: the registry's Confluent API root, e.g. http://host:8081)"
    if not re.match(r"https?://[^/\s]+", url):
        return f"'{url}' is not an http:// or https:// URL (fix: the registry's Confluent API root, e.g. http://host:8081)"
    unknown = sorted(set(props) - set(REGISTRY_PROPERTIES))
    if unknown:
        close = [c for u in unknown for c in difflib.get_close_matches(u, REGISTRY_PROPERTIES, n=1)]
        return (f"unknown registry propert(ies) {', '.join(unknown)}; known: {', '.join(REGISTRY_PROPERTIES)} (fix: "
                + (f"did you mean {', '.join(close)}?" if close else "remove them") + ")")
    return None


#: The client properties of a registry, as confluent-kafka's SchemaRegistryClient names them.
REGISTRY_PROPERTIES = ("url", "basic.auth.user.info", "bearer.auth.token", "ssl.ca.location",
                       "ssl.certificate.location", "ssl.key.location")


@dataclass(frozen=True)
class Registry:
    """The schema registries (Confluent REST API) of the two clusters, and what `registry sync` moves."""

    #: The old cluster's registry: url, and optionally basic.auth.user.info (user:password, from the env
    #: file), bearer.auth.token, ssl.ca.location, ssl.certificate.location, ssl.key.location.
    old: dict[str, str] = field(metadata={"check": _registry_url,
                                          "fix": "the old registry's client properties, at least url"})
    new: dict[str, str] = field(metadata={"check": _registry_url,
                                          "fix": "the new registry's client properties, at least url"})
    #: Subjects moved besides those of the selected topics (TopicNameStrategy: <topic>-key, <topic>-value);
    #: subjects their schemas reference always come along. Default: none besides.
    subjects: Selection = field(default_factory=lambda: Selection(include=[]))
    #: Soft-deleted versions of a moved subject: copy (kept deleted on the new registry too) or skip. Either
    #: way the sync reports them.
    soft_deleted: Literal["copy", "skip"] = "skip"
    #: How often a running `cutover mirror` follows new registrations on the old registry.
    sync_interval: Duration = Duration(30)


_PRINCIPAL = re.compile(r"[A-Za-z][A-Za-z0-9]*:.+")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _principals(mapping: dict[str, str]) -> str | None:
    for old, new in mapping.items():
        for p in (old, new):
            if not _PRINCIPAL.fullmatch(p) or p.endswith(":*"):
                return (f"'{p}' is not a principal of the form Type:name (the wildcard maps to itself) (fix: e.g. "
                        "User:orders-app)")
    if len(set(mapping.values())) != len(mapping):
        return ("two old principals map to one new principal: their rights would merge (fix: give each old "
                "principal its own new one)")
    return None


def _credential_principals(mapping: dict[str, dict[str, str]]) -> str | None:
    for principal in mapping:
        if not _PRINCIPAL.fullmatch(principal) or principal.endswith(":*"):
            return (f"'{principal}' is not a principal of the form Type:name (fix: "
                    f"{'User:' + principal if ':' not in principal else 'User:orders-app'}, as its ACLs name it)")
    return None


def _variables(mapping: dict[str, str]) -> str | None:
    for user, var in mapping.items():
        if not _VAR.fullmatch(var):
            return (f"the value given for SCRAM user {user} is not a variable name (not shown: it may be the "
                    "password) (fix: give the name of a variable of the env file, not the password itself)")
    return None


@dataclass(frozen=True)
class SideRights:
    """What no cluster reveals of how it authorizes (DescribeConfigs hides both values)."""

    #: The cluster's super.users, e.g. [User:admin]: they may do everything.
    super_users: list[str] = field(default_factory=list)
    #: The cluster's allow.everyone.if.no.acl.found.
    allow_if_no_acl: bool = False


@dataclass(frozen=True)
class Rights:
    """How `cutover rights` carries ACLs, client quotas and SCRAM users to the new cluster, and how
    the switch's rights-match precondition compares the two clusters' effective rights."""

    #: Old principal -> its name on the new cluster, for clusters that authenticate differently (e.g.
    #: User:CN=orders-app,OU=apps on mTLS -> User:orders-app on SASL). Unlisted principals keep their name.
    principals: dict[str, str] = field(default_factory=dict, metadata={"check": _principals})
    #: Whether cutover owns the rights of the selection on the new cluster: `rights apply` then also
    #: deletes the ACLs and quotas the old cluster does not hold. Default: additive only.
    owned: bool = False
    #: Whether rights the new cluster grants beyond the old are allowed (still reported) rather than a
    #: finding that blocks promote.
    allow_extra: bool = False
    #: SCRAM user -> the env-file variable with its password on the new cluster (a SCRAM password is
    #: never readable from a cluster; never put the password itself in the plan).
    scram_passwords: dict[str, str] = field(default_factory=dict, metadata={"check": _variables})
    #: Principal (its new name) -> client properties that authenticate as it on the new cluster
    #: (ssl.certificate.location + ssl.key.location, or sasl.username + sasl.password): the audit
    #: proves them with a real handshake.
    credentials: dict[str, dict[str, str]] = field(default_factory=dict, metadata={"check": _credential_principals})
    old: SideRights = field(default_factory=SideRights)
    new: SideRights = field(default_factory=SideRights)

    def super_users_of(self, side: str) -> list[str]:
        return (self.old if side == "old" else self.new).super_users

    def allow_if_no_acl_of(self, side: str) -> bool:
        return (self.old if side == "old" else self.new).allow_if_no_acl


def _reader_name(name: str) -> str | None:
    if _WORD.fullmatch(name):
        return None
    fixed = _as_word(name, "reader")
    return (f"'{name}' cannot name a reader: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or "
            f"digit (fix: e.g. {fixed})")


@dataclass(frozen=True)
class Reader:
    """A reader that keeps its Kafka positions outside consumer groups (`cutover readers`)."""

    #: The reader's name: `cutover readers translate --reader NAME`.
    name: str = field(metadata={"check": _reader_name})
    #: spark-checkpoint: a Spark Structured Streaming query, its Kafka positions in its checkpoint folder.
    #: kafka-streams: a Kafka Streams application, its stores' changelog positions in its state directory
    #: (its input positions are its group's, application.id, which the mirror's group sync moves).
    #: flink: a Flink job's KafkaSource, its positions in the job's savepoints.
    #: connect: a Kafka Connect worker's source connectors, their positions in the worker's offsets topic.
    #: (Each kind's fields: plan/reader_kinds.py.)
    kind: str = field(metadata={"check": reader_kind_problem})
    #: spark-checkpoint: the query's checkpointLocation, a local folder (relative to the plan) or s3a://BUCKET/PATH
    #: (also s3://) on the catalog's S3 storage; it holds offsets/ and commits/.
    checkpoint: str | None = None
    #: spark-checkpoint with a file sink (parquet, json, ...): the sink's output folder (or s3a://), whose
    #: _spark_metadata log gets an entry for the batch cutover adds. Leave it out for other sinks (Iceberg,
    #: foreachBatch).
    sink: str | None = None
    #: kafka-streams: the application's application.id (its group, and its folder under state_dir).
    application_id: str | None = None
    #: kafka-streams: the application's state.dir, a local folder (relative to the plan). With several
    #: instances, declare one reader per instance's state.dir.
    state_dir: str | None = None
    #: kafka-streams: what becomes of the local stores. rewrite: each task's .checkpoint (and each store's
    #: .position) is translated, so the stores carry on without restoring; wipe: the state is set aside
    #: (kept, renamed) and the stores restore from the target cluster's changelogs.
    state: Literal["rewrite", "wipe"] = "rewrite"
    #: flink: the job's name (in messages and the start file).
    job: str | None = None
    #: flink: the uid of the job's KafkaSource while it runs on the old cluster.
    source_uid: str | None = None
    #: flink: the KafkaSource's uid while the job runs on the new cluster (default: source_uid + "-new"). A
    #: moved job restores every operator's state but its source's, which starts at the translated offsets.
    new_source_uid: str | None = None
    #: flink: the folder the job's stop-with-savepoint writes into (relative to the plan); a move reads the
    #: newest savepoint in it.
    savepoints: str | None = None
    #: flink: how the restarted job takes its start offsets. offsets: from the start file
    #: (OffsetsInitializer.offsets(map, OffsetResetStrategy.NONE)); committed: also committed to `group` on the
    #: target cluster (OffsetsInitializer.committedOffsets(OffsetResetStrategy.NONE)). Default offsets.
    start: Literal["offsets", "committed"] | None = None
    #: flink: the KafkaSource's group.id (needed by start: committed).
    group: str | None = None
    #: flink: the OffsetResetStrategy the job's initializer carries: none, earliest (Flink's default) or latest.
    #: Anything but none lets an out-of-range start silently rewind or skip: plan check warns.
    reset: Literal["none", "earliest", "latest"] | None = None
    #: flink: where a move writes the start file the restarted job reads (relative to the plan; default
    #: cutover-start.json in the savepoints folder).
    start_file: str | None = None
    #: connect: the old cluster's Connect worker's REST URL.
    old_url: str | None = None
    #: connect: the new cluster's Connect worker's REST URL.
    new_url: str | None = None
    #: connect: the source connectors whose offsets must be the same on both workers.
    connectors: list[str] | None = None
    #: connect: the workers' offset.storage.topic (select it, with their config and status topics).
    offsets_topic: str | None = None


def _port(port: int | None) -> str | None:
    return None if port is None or 1 <= port <= 65535 else \
        f"{port} is not a TCP port (fix: a port from 1 to 65535, or leave it out to serve none)"


MetricsPart = Literal["mirror", "reverse_mirror", "shadow", "exporter"]
def _host(host: str | None) -> str | None:
    problem = None if host is None else host_problem(host)
    return None if problem is None else f"{problem[0]} (fix: {problem[1]})"


@dataclass(frozen=True)
class MetricsPorts:
    """Where each long-running part serves its Prometheus metrics when its command gives no port: so that
    the processes promote and drills start (the reverse mirror, a drill's mirror and shadow) are scraped
    where Prometheus looks. Leave one out to serve none."""

    #: `cutover mirror` (old -> new), also when a drill starts it.
    mirror: int | None = field(default=None, metadata={"check": _port})
    #: `cutover mirror --reverse` (new -> old), also the one promote leaves running.
    reverse_mirror: int | None = field(default=None, metadata={"check": _port})
    #: `cutover shadow`, also a drill's shadow runs (the drill process serves them).
    shadow: int | None = field(default=None, metadata={"check": _port})
    #: `cutover exporter`.
    exporter: int | None = field(default=None, metadata={"check": _port})


@dataclass(frozen=True)
class Observability:
    """Where cutover's metrics are watched."""

    #: The Prometheus that scrapes cutover's exporters (http://host:9090): `cutover assess` asks it which
    #: cutover targets are up and whether cutover's alert rules are loaded. cutover never needs it to run.
    prometheus: str | None = field(default=None, metadata={"check": lambda url: _http_url(url)})
    #: The address each part serves its metrics on when its command gives no --metrics-host: default
    #: 127.0.0.1, this host only; 0.0.0.0 for every interface (a Prometheus on another host), or one
    #: address of this host.
    host: str | None = field(default=None, metadata={"check": _host})
    #: Where each part serves its metrics when its command gives no port (each port once).
    ports: MetricsPorts = field(default_factory=MetricsPorts, metadata={"check": lambda ps: _distinct(ps)})


def _http_url(url: str | None) -> str | None:
    if url is None or re.match(r"https?://[^/\s]+", url):
        return None
    fix = f"http://{url}" if "://" not in url else "http://host:9090, Prometheus's own address"
    return f"'{url}' is not an http:// or https:// URL (fix: {fix})"


def _distinct(ports: MetricsPorts) -> str | None:
    given = [p for p in (ports.mirror, ports.reverse_mirror, ports.shadow, ports.exporter) if p is not None]
    return None if len(given) == len(set(given)) else \
        f"a port is given to two parts ({given}) (fix: give each its own)"


@dataclass(frozen=True)
class Prices:
    """Prices for `cutover assess`'s cost estimate, in your currency: cutover has no price list (prices change).
    Any left out is not estimated."""

    #: The currency the prices are in, as shown.
    currency: str = "USD"
    #: Object storage, per GB and month (the new tables).
    storage_gb_month: float | None = None
    #: Kafka storage on the new cluster, per GB and month (before replication).
    kafka_gb_month: float | None = None
    #: Object store write requests (PUT, COPY, POST, LIST), per 1,000.
    put_per_1000: float | None = None
    #: Object store read requests (GET), per 1,000.
    get_per_1000: float | None = None
    #: Network transfer out of the old cluster, per GB (the backfill).
    transfer_gb: float | None = None


@dataclass(frozen=True)
class PlanSpec:
    """What the YAML holds. `Plan` adds where it came from."""

    clusters: Clusters
    #: The plan's name: in reports, journals and hook environments, and part of Kafka transactional and group ids.
    name: str = field(default="migration", metadata={"check": _plan_name})
    #: The plan format's version; this cutover reads 1.
    version: int = field(default=1, metadata={"check": lambda v: None if v == 1 else
                                              f"plan version {v} is not supported by this cutover (supports 1) "
                                              "(fix: version: 1)"})
    #: A file of NAME=value lines (relative to the plan) that ${NAME} in the plan reads; the environment wins.
    env_file: str | None = None
    topics: Selection = field(default_factory=Selection)
    groups: Selection = field(default_factory=Selection)
    tables: list[TablePair] = field(default_factory=list)
    catalog: Catalog | None = None
    spark: Spark = field(default_factory=Spark)
    mirror: Mirror = field(default_factory=Mirror)
    gates: Gates = field(default_factory=Gates)
    #: Switch event -> the command run at it (see the promote and rollback guide): e.g. freeze_producers.
    hooks: dict[str, str] = field(default_factory=dict, metadata={"check": _hook_events})
    routing: Routing | None = None
    switch: Switch = field(default_factory=Switch)
    registry: Registry | None = None
    rights: Rights | None = None
    complete: Complete = field(default_factory=Complete)
    #: Readers whose positions live outside consumer groups, moved exactly by `cutover readers translate`.
    readers: list[Reader] = field(default_factory=list)
    #: Prices for `cutover assess`'s cost estimate (optional).
    prices: Prices | None = None
    #: Where cutover's metrics are watched (optional).
    observability: Observability | None = None


ClusterSide = Literal["old", "new"]


@dataclass(frozen=True)
class Plan:
    spec: PlanSpec
    file: Path

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def base_dir(self) -> Path:
        return self.file.parent

    @property
    def journal_dir(self) -> Path:
        """The folder of the migration's records: the switch journal, the reader moves, the drills run."""
        return self.base_dir / self.spec.switch.journal_dir / self.name

    def cluster(self, side: ClusterSide) -> dict[str, str]:
        return self.spec.clusters.old if side == "old" else self.spec.clusters.new

    def require_catalog(self, needs: str) -> Catalog:
        """The plan's Iceberg catalog. Plan validation refuses table pairs without one; what reaches the tables
        otherwise (a drill's table step on a plan without pairs) is refused here, named, not asserted."""
        if self.spec.catalog is None:
            raise UsageError(f"{self.file}: catalog: the plan has no catalog section, which {needs} needs",
                             fix=f"add catalog: {{uri: ...}}, e.g. {CATALOG_URIS}")
        return self.spec.catalog

    def metrics_endpoint(self, part: MetricsPart, port: int | None = None, host: str | None = None,
                         options: tuple[str, str] = ("--metrics-port", "--metrics-host")) -> Endpoint | None:
        """Where `part` serves its metrics, None for nowhere: the command's port (its option `options[0]`), else
        the plan's observability.ports; on the command's host (`options[1]`), else the plan's
        observability.host, else 127.0.0.1. A host with no port anywhere is refused: it would serve nothing."""
        from cutover.errors import UsageError

        port_option, host_option = options
        obs = self.spec.observability or Observability()
        port_from = port_option if port is not None else f"observability.ports.{part}"
        port = port if port is not None else getattr(obs.ports, part)
        if port is None:
            if host is not None:
                raise UsageError(f"{host_option} {host} says where to serve the metrics, but no port is given: none "
                                 "would be served", fix=f"give {port_option} N too, or set observability.ports.{part} "
                                 f"in {self.file}")
            return None
        if host is not None and (problem := host_problem(host)):
            raise UsageError(f"{host_option} {problem[0]}", fix=f"{host_option} {problem[1]}")
        host_from = host_option if host is not None else "observability.host" if obs.host is not None else None
        return Endpoint(host if host is not None else obs.host or LOOPBACK, port, port_from, host_from, options,
                        self.file)

