"""From evidence to the scorecard: each row's findings, verdicts and drills. Pure: the evidence comes in
read (assess/gather.py), each part either its facts or Unknown with the reason it could not be read."""

from __future__ import annotations

import dataclasses
import math
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cutover.assess.facts import GroupFacts, TopicFacts, Unknown
from cutover.assess.model import DRILLS, QUESTIONS, READINESS, Finding, Row, Verdict
from cutover.kafka import capabilities
from cutover.kafka.producers import Writers

if TYPE_CHECKING:
    from cutover.readers.find import Finding as ReaderFinding
from cutover.plan import Plan


@dataclass
class Side:
    """One cluster's security and size."""

    protocol: str
    sasl: str | None
    brokers: int | Unknown
    #: whether it enforces ACLs (an authorizer is configured); Unknown when it refused to say
    acls: bool | Unknown


@dataclass
class TableFacts:
    table: str
    exists: bool
    format_version: int | None = None
    partitioning: str = ""
    snapshots: int = 0
    #: commits in the last day
    commits_day: int = 0
    data_bytes: int = 0
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class Evidence:
    plan: Plan
    #: the topic names the plan selects on the old cluster (Unknown: the cluster could not list them)
    selected: list[str] | Unknown
    topics: dict[str, TopicFacts] | Unknown
    groups: list[GroupFacts] | Unknown
    writers: Writers | Unknown
    #: what `readers find` lists (readers without groups)
    readers: list[ReaderFinding] | Unknown
    sides: dict[str, Side | Unknown]
    #: `rights audit`'s result (None: the plan has no rights section)
    rights: dict[str, Any] | Unknown | None
    #: per table name
    tables: dict[str, TableFacts | Unknown]
    #: bytes a second the read probe measured
    throughput: float | Unknown
    #: the drills recorded for this plan, newest last: {"runbook", "passed", "ended"}
    drills: list[dict[str, Any]]
    #: the catalog and storage probes: {"catalog": text or Unknown, "storage": ...}
    lake: dict[str, str | Unknown]
    #: Prometheus: {"url", "targets": [...], "rules": n} or Unknown (None: the plan names none)
    prometheus: dict[str, Any] | Unknown | None
    #: `registry audit`'s verdict, or Unknown (None: no registry section)
    registry: dict[str, Any] | Unknown | None = None
    #: what the new cluster can do (its API list and the real probe), or Unknown (None: not asked)
    target: capabilities.Report | Unknown | None = None


def duration(seconds: float | None) -> str:
    """`3d 4h`, `2h 10m`, `45s`; None: unlimited."""
    if seconds is None or math.isinf(seconds):
        return "unlimited"
    s = int(max(0.0, seconds))
    for unit, size, sub, subsize in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            rest = (s % size) // subsize
            return f"{s // size}{unit}" + (f" {rest}{sub}" if rest else "")
    return f"{s}s"


def size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def replay_window(t: TopicFacts) -> tuple[float, str]:
    """How long a writer of the topic may be down before retention deletes a record it has not written:
    (seconds, the limit that decides). inf when neither limit applies (compacted only, or unlimited)."""
    if "delete" not in t.configs.get("cleanup.policy", "delete"):
        return math.inf, "compacted, not deleted by age or size"
    windows = []
    if (ms := t.setting("retention.ms")) is not None:
        windows.append((ms / 1000, f"retention.ms {ms}"))
    if (limit := t.setting("retention.bytes")) is not None and t.rate and t.record_bytes:
        per_partition = t.rate * t.record_bytes / max(1, t.partitions)
        windows.append((limit / per_partition, f"retention.bytes {limit} per partition at "
                        f"{size(per_partition)}/s"))
    return min(windows) if windows else (math.inf, "no retention limit")


def score(e: Evidence) -> list[Row]:
    return [_kafka(e), _tables_q(e), _storage(e), _cost(e), _security(e), _rollback(e), _observability(e, "question"),
            _offsets(e), _commits(e), _replay(e), _schemas(e), _elasticity(e), _observability(e, "readiness")]


def _row(key: str, kind: str) -> Row:
    titles = QUESTIONS if kind == "question" else READINESS
    return Row(key, kind, titles[key], [], {}, list(DRILLS.get(key, ())))  # type: ignore[arg-type]


def _unknown(row: Row, what: str, value: Unknown) -> None:
    row.findings.append(Finding("unknown", f"{what}: {value.reason}"))


def _kafka(e: Evidence) -> Row:
    """Kafka semantics: what the old cluster's topics, writers, groups and readers need kept, and whether the
    new cluster can keep it (its capabilities)."""
    row = _kafka_old(e)
    _target(row, e.target, capabilities.mirror_needs(e.plan.spec.mirror.mode))
    return row


def _kafka_old(e: Evidence) -> Row:
    row = _row("kafka-semantics", "question")
    if isinstance(e.selected, Unknown):
        _unknown(row, "the old cluster's topics", e.selected)
        return row
    if not e.selected:
        row.findings.append(Finding("blocker", "the plan selects no topic on the old cluster: nothing would move "
                                    "(check topics.include and topics.exclude)"))
        return row
    if isinstance(e.topics, Unknown):
        _unknown(row, "the topics' settings", e.topics)
    else:
        row.evidence["topics"] = {t: {"partitions": f.partitions, **f.configs,
                                      "oldest_record_age": None if f.oldest_ms is None else
                                      duration(_age(f.oldest_ms))} for t, f in sorted(e.topics.items())}
        stamped = sorted(t for t, f in e.topics.items() if f.configs.get("message.timestamp.type") == "LogAppendTime")
        if stamped:
            row.findings.append(Finding("risk", f"{len(stamped)} topic(s) stamp records on append (LogAppendTime): "
                                        f"{', '.join(stamped[:5])}; the mirror keeps the old cluster's timestamps "
                                        "only where the new topic keeps CreateTime"))
    if isinstance(e.writers, Unknown):
        _unknown(row, "the producers (ListTransactions, DescribeProducers)", e.writers)
    else:
        # the transactional ids of the producers of the selected partitions, but cutover's own (its mirrors)
        writing = {p.producer_id for p in e.writers.producers}
        ids = sorted({t.transactional_id for t in e.writers.transactions if t.producer_id in writing
                      and not t.transactional_id.startswith(e.plan.spec.mirror.state_prefix)})
        open_ = sorted({f"{p.topic}[{p.partition}]" for p in e.writers.producers if p.transaction_start is not None})
        row.evidence["transactional_ids"] = ids
        row.evidence["producers"] = len({p.producer_id for p in e.writers.producers})
        row.evidence["open_transactions"] = open_
        if ids:
            row.findings.append(Finding("risk", f"transactional producers write here ({len(ids)} id(s), e.g. "
                                        f"{', '.join(ids[:3])}): promote must wait for their transactions to close; "
                                        "rehearse it with the open-transaction-at-freeze drill"))
    if isinstance(e.groups, Unknown):
        _unknown(row, "the consumer groups", e.groups)
    else:
        row.evidence["groups"] = {g.group: {"protocol": g.protocol, "members": g.members, "topics": g.topics,
                                            "lag": sum(g.lag.values())} for g in e.groups}
        wide = _wide_groups(e)
        if wide:
            row.findings.append(Finding("risk", "; ".join(
                f"group {g} also reads {', '.join(ts)}, which the plan does not select: after the switch it finds "
                "no such topic on the new cluster" for g, ts in wide.items())))
    if not isinstance(e.readers, Unknown) and e.readers:
        row.findings.append(Finding("risk", f"{len(e.readers)} reader(s) keep positions outside groups and are not "
                                    "declared: " + "; ".join(f"{r.kind} {r.name}" for r in e.readers[:5])))
    return row


def _target(row: Row, target: capabilities.Report | Unknown | None, needs: tuple[str, ...]) -> None:
    """The new cluster's capabilities: a blocker for each one the mirror needs (`needs`: in the plan's mirror
    mode) and lacks, a risk for any other it lacks, unknown where neither its API list nor the probe could tell."""
    if target is None:
        return
    if isinstance(target, Unknown):
        _unknown(row, "what the new cluster can do", target)
        return
    row.evidence["target_capabilities"] = target.as_dict()
    for f in target.findings:
        c = f.capability
        if f.supported is False:
            verdict: Verdict = "blocker" if c.name in needs else "risk"
            row.findings.append(Finding(verdict, f"the new cluster lacks {c.name} ({f.evidence}): {c.without}; "
                                        f"{c.cutover_does}"))
        elif f.supported is None and c.probed:
            row.findings.append(Finding("unknown", f"whether the new cluster keeps {c.name}: {f.evidence}"))


def _wide_groups(e: Evidence) -> dict[str, list[str]]:
    if isinstance(e.groups, Unknown) or isinstance(e.selected, Unknown):
        return {}
    chosen = set(e.selected)
    out = {}
    for g in e.groups:
        outside = [t for t in g.topics if t not in chosen and not t.startswith("__")]
        if outside and any(t in chosen for t in g.topics):
            out[g.group] = outside
    return out


def _age(ms: int) -> float:
    import time

    return time.time() - ms / 1000


def _tables_q(e: Evidence) -> Row:
    row = _row("table-semantics", "question")
    pairs = e.plan.spec.tables
    if not pairs:
        row.findings.append(Finding("ready", "no table pairs: the plan moves topics only"))
        return row
    row.evidence["pairs"] = {p.topic: {"old": p.old, "new": p.new, "hand_over": p.writer_offsets,
                                       "format": p.format, "schema_drift": p.schema_drift,
                                       "on_bad_record": p.on_bad_record} for p in pairs}
    for p in pairs:
        old = e.tables.get(p.old)
        if isinstance(old, Unknown):
            _unknown(row, f"table {p.old}", old)
        elif old is not None and not old.exists:
            row.findings.append(Finding("blocker", f"the old pipeline's table {p.old} does not exist: verify has "
                                        "nothing to compare the shadow with"))
        if p.schema_drift == "fail":
            row.findings.append(Finding("risk", f"{p.new}: schema_drift fail stops the shadow at the first new "
                                        "field; rehearse with the schema-change-mid-stream drill"))
    return row


def _storage(e: Evidence) -> Row:
    row = _row("storage", "question")
    cat = e.plan.spec.catalog
    if cat is None and e.plan.spec.tables:
        row.findings.append(Finding("blocker", f"the plan pairs {len(e.plan.spec.tables)} table(s) but names no "
                                    "catalog: the shadow has nowhere to write and verify nothing to read (add "
                                    "catalog: to the plan)"))
        return row
    if cat is None:
        row.findings.append(Finding("ready", "no catalog: the plan moves topics only"))
        return row
    row.evidence["catalog"] = {"type": cat.type, "uri": cat.uri.split("@")[-1], "storage": cat.storage
                               or cat.warehouse}
    for part, found in e.lake.items():
        if isinstance(found, Unknown):
            row.findings.append(Finding("blocker", f"the {part} cannot be used: {found.reason}"))
        else:
            row.evidence[part] = found
    return row


def _cost(e: Evidence) -> Row:
    row = _row("cost", "question")
    if isinstance(e.topics, Unknown):
        _unknown(row, "the topics' sizes", e.topics)
        return row
    records = sum(t.records for t in e.topics.values())
    nbytes = sum(t.bytes for t in e.topics.values())
    replicas = e.plan.spec.mirror.replication_factor
    row.evidence.update({"records_to_mirror": records, "records_exact": all(t.exact for t in e.topics.values()),
                         "bytes_to_mirror": round(nbytes),
                         "new_cluster_bytes": round(nbytes * replicas), "replication_factor": replicas})
    if isinstance(e.throughput, Unknown):
        _unknown(row, "the read probe", e.throughput)
    elif e.throughput > 0:
        row.evidence["read_probe_bytes_per_second"] = round(e.throughput)
        row.evidence["backfill_time"] = duration(nbytes / e.throughput)
    table_bytes = sum(t.data_bytes for t in e.tables.values() if isinstance(t, TableFacts))
    commits = sum(t.commits_day for t in e.tables.values() if isinstance(t, TableFacts))
    shadow_commits = len(e.plan.spec.tables) * 86400 / max(1.0, float(e.plan.spec.spark.trigger_interval))
    # A shadow commit writes its data files, a manifest, a manifest list and the table metadata (4 PUTs a
    # table and batch, one data file a partition of the batch), and reads the current metadata first.
    puts = shadow_commits * 4
    row.evidence.update({"new_tables_bytes": table_bytes, "old_tables_commits_last_day": commits,
                         "shadow_commits_per_day": round(shadow_commits), "object_store_puts_per_day": round(puts),
                         "object_store_gets_per_day": round(shadow_commits * 2)})
    prices = e.plan.spec.prices
    if prices is not None:
        money: dict[str, float] = {}
        gb = 1e9
        if prices.kafka_gb_month is not None:
            money["new cluster storage a month"] = nbytes * replicas / gb * prices.kafka_gb_month
        if prices.storage_gb_month is not None:
            money["new tables storage a month"] = table_bytes / gb * prices.storage_gb_month
        if prices.put_per_1000 is not None:
            money["object store writes a month"] = puts * 30 / 1000 * prices.put_per_1000
        if prices.get_per_1000 is not None:
            money["object store reads a month"] = shadow_commits * 2 * 30 / 1000 * prices.get_per_1000
        if prices.transfer_gb is not None:
            money["backfill transfer, once"] = nbytes / gb * prices.transfer_gb
        row.evidence["estimate"] = {k: f"{v:,.2f} {prices.currency}" for k, v in money.items()}
    else:
        row.evidence["estimate"] = "no prices in the plan (prices: ...): sizes only"
    return row


def _security(e: Evidence) -> Row:
    row = _row("security", "question")
    for name, side in e.sides.items():
        if isinstance(side, Unknown):
            _unknown(row, f"the {name} cluster", side)
            continue
        row.evidence[name] = {"protocol": side.protocol, "sasl": side.sasl,
                              "acls_enforced": None if isinstance(side.acls, Unknown) else side.acls}
        if "SSL" not in side.protocol.upper():
            row.findings.append(Finding("risk", f"the {name} cluster is reached without TLS ({side.protocol})"))
        if isinstance(side.acls, Unknown):
            _unknown(row, f"whether the {name} cluster enforces ACLs", side.acls)
        elif not side.acls:
            row.findings.append(Finding("risk", f"the {name} cluster enforces no ACLs (no authorizer): any client "
                                        "may read and write every topic"))
    if isinstance(e.rights, Unknown):
        _unknown(row, "the rights audit", e.rights)
    elif e.rights is None:
        row.evidence["rights_audit"] = "no rights section: principals' rights are not compared"
    else:
        row.evidence["rights_audit"] = e.rights
        if not e.rights.get("passed"):
            row.findings.append(Finding("blocker", "the rights audit fails: principals lack on the new cluster "
                                        "rights they have on the old (cutover rights plan shows them)"))
    inline = _inline_secrets(e.plan)
    row.evidence["secrets_inline"] = inline
    if inline:
        row.findings.append(Finding("risk", f"secrets written in the plan file, not taken from the environment or "
                                    f"env_file: {', '.join(inline)}"))
    cat = e.plan.spec.catalog
    if cat is not None:
        row.evidence["catalog_auth"] = "credential" if any(k in cat.properties for k in ("credential", "token")) \
            or "@" in cat.uri else "none"
    registry = e.plan.spec.registry
    if registry is not None:
        row.evidence["registry_auth"] = {side: "credentials" if any(
            w in k for k in conf for w in ("auth", "password", "token", "key")) else "none"
            for side, conf in (("old", registry.old), ("new", registry.new))}
        plain = [side for side, conf in (("old", registry.old), ("new", registry.new))
                 if not str(conf.get("url", "")).startswith("https://")]
        if plain:
            row.findings.append(Finding("risk", f"the {' and '.join(plain)} schema registry is reached without TLS"))
    return row


#: Plan keys whose value is a secret.
_SECRET_KEYS = ("sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
                "s3.secret-access-key", "s3.session-token", "credential", "token", "password")


def _inline_secrets(plan: Plan) -> list[str]:
    """Secret keys the plan file writes as a literal value (not ${VAR})."""
    import yaml

    try:
        raw = yaml.safe_load(plan.file.read_text())
    except (OSError, yaml.YAMLError):
        return []
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                here = f"{path}.{k}" if path else str(k)
                if isinstance(v, str) and str(k).lower().endswith(_SECRET_KEYS) and "${" not in v:
                    found.append(here)
                walk(v, here)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")

    walk(raw, "")
    return found


def _rollback(e: Evidence) -> Row:
    row = _row("rollback", "question")
    window = float(e.plan.spec.gates.rollback_window)
    row.evidence["reverse_mirror"] = e.plan.spec.switch.reverse_mirror
    row.evidence["rollback_window"] = duration(window)
    if not e.plan.spec.switch.reverse_mirror:
        row.findings.append(Finding("blocker", "switch.reverse_mirror is off: a rollback would lose every record "
                                    "written on the new cluster after promote"))
    if isinstance(e.topics, Unknown):
        _unknown(row, "the old cluster's retention", e.topics)
    else:
        short = {t: w for t, f in e.topics.items() if (w := replay_window(f)[0]) < window}
        if short:
            worst = min(short, key=lambda t: short[t])
            row.findings.append(Finding("risk", f"{len(short)} topic(s) keep records on the old cluster for less than "
                                        f"the rollback window ({duration(window)}), e.g. {worst}: "
                                        f"{duration(short[worst])}; what the reverse mirror carries back may be "
                                        "deleted before the readers that roll back read it"))
    passed = [d for d in e.drills if d.get("passed") and d.get("runbook") == "full-migration"]
    row.evidence["last_switch_drill"] = passed[-1] if passed else None
    if not passed:
        row.findings.append(Finding("risk", "no promote/rollback drill has passed for this plan: run cutover drill "
                                    "full-migration on a rehearsal copy"))
    return row


def _observability(e: Evidence, kind: str) -> Row:
    row = _row("observability", kind)
    if e.prometheus is None:
        row.findings.append(Finding("unknown", "the plan names no Prometheus (observability.prometheus): whether "
                                    "the exporters are scraped and the alert rules loaded cannot be read"))
    elif isinstance(e.prometheus, Unknown):
        _unknown(row, "Prometheus", e.prometheus)
    else:
        row.evidence.update(e.prometheus)
        down = [t for t in e.prometheus.get("targets", []) if t.get("health") != "up"]
        if not e.prometheus.get("targets"):
            row.findings.append(Finding("risk", "Prometheus scrapes no cutover exporter"))
        elif down:
            row.findings.append(Finding("risk", f"{len(down)} cutover target(s) down: "
                                        + ", ".join(t.get("url", "?") for t in down[:3])))
        if not e.prometheus.get("rules"):
            row.findings.append(Finding("risk", "Prometheus has no cutover alert rules loaded"))
        unscraped = _unscraped(e)
        row.evidence["unscraped_ports"] = unscraped
        for part, port in unscraped.items():
            row.findings.append(Finding("risk", f"the {part.replace('_', ' ')} serves its metrics on port {port} "
                                        "(observability.ports) but no cutover target of Prometheus is on that port"))
    return row


def _unscraped(e: Evidence) -> dict[str, int]:
    """The plan's metrics ports (observability.ports) no cutover target of Prometheus scrapes."""
    assert isinstance(e.prometheus, dict)
    obs = e.plan.spec.observability
    ports = {} if obs is None else {k: v for k, v in dataclasses.asdict(obs.ports).items() if v is not None}
    scraped = {urllib.parse.urlsplit(str(t.get("url") or "")).port for t in e.prometheus.get("targets", [])}
    return {part: port for part, port in ports.items() if port not in scraped}


def _offsets(e: Evidence) -> Row:
    row = _row("offset-ownership", "readiness")
    row.evidence["declared_readers"] = [r.name for r in e.plan.spec.readers]
    if isinstance(e.readers, Unknown):
        _unknown(row, "readers find", e.readers)
    else:
        row.evidence["undeclared_readers"] = [r.as_dict() for r in e.readers]
        if e.readers:
            row.findings.append(Finding("risk", f"{len(e.readers)} reader(s) keep their own positions and are not "
                                        "declared under readers: a switch would leave them behind"))
    wide = _wide_groups(e)
    if wide:
        row.findings.append(Finding("risk", f"{len(wide)} selected group(s) also read unselected topics: "
                                    + ", ".join(sorted(wide))))
    return row


def _commits(e: Evidence) -> Row:
    row = _row("table-commits", "readiness")
    if not e.plan.spec.tables:
        row.findings.append(Finding("ready", "no table pairs"))
    for name, t in sorted(e.tables.items()):
        if isinstance(t, Unknown):
            _unknown(row, f"table {name}", t)
            continue
        if not t.exists:
            row.evidence[name] = "not created yet"
            continue
        row.evidence[name] = {"format_version": t.format_version, "partitioning": t.partitioning,
                              "snapshots": t.snapshots, "commits_last_day": t.commits_day,
                              "maintenance": {k: v for k, v in t.properties.items()
                                              if k.startswith(("history.expire", "write.metadata", "commit."))}}
        if t.format_version == 1:
            row.findings.append(Finding("risk", f"{name} is format version 1: row-level deletes and some "
                                        "maintenance need version 2"))
        if t.snapshots > 10_000:
            row.findings.append(Finding("risk", f"{name} holds {t.snapshots:,} snapshots: expire them (the shadow "
                                        "adds one a batch)"))
    return row


def _replay(e: Evidence) -> Row:
    row = _row("replay-window", "readiness")
    gate = float(e.plan.spec.gates.min_replay_window)
    row.evidence["min_replay_window"] = duration(gate)
    if isinstance(e.topics, Unknown):
        _unknown(row, "the topics' retention", e.topics)
        return row
    topics = [p.topic for p in e.plan.spec.tables] or sorted(e.topics)
    windows = {}
    for t in topics:
        f = e.topics.get(t)
        if f is None:
            continue
        seconds, why = replay_window(f)
        windows[t] = {"window": duration(seconds), "decided_by": why,
                      "rate_per_second": None if f.rate is None else round(f.rate, 2)}
        if seconds < gate:
            row.findings.append(Finding("blocker", f"{t}: a writer down for {duration(seconds)} loses records "
                                        f"({why}), below gates.min_replay_window {duration(gate)}"))
    row.evidence["topics"] = windows
    return row


def _schemas(e: Evidence) -> Row:
    row = _row("schema-governance", "readiness")
    formats = sorted({p.format for p in e.plan.spec.tables} | {p.key_format for p in e.plan.spec.tables})
    row.evidence["formats"] = formats
    row.evidence["registry"] = e.plan.spec.registry is not None
    if isinstance(e.registry, Unknown):
        _unknown(row, "the registry audit", e.registry)
    elif e.registry is not None:
        row.evidence["registry_audit"] = e.registry
        if not e.registry.get("passed"):
            row.findings.append(Finding("blocker", "the registry audit fails: schema ids in the topics do not mean "
                                        "the same schema on the new registry (cutover registry audit names them)"))
    return row


def _elasticity(e: Evidence) -> Row:
    row = _row("platform-elasticity", "readiness")
    sizes = {n: s.brokers for n, s in e.sides.items() if isinstance(s, Side)}
    row.evidence["brokers"] = {n: None if isinstance(b, Unknown) else b for n, b in sizes.items()}
    for n, b in sizes.items():
        if isinstance(b, Unknown):
            _unknown(row, f"the {n} cluster's brokers", b)
    old, new = sizes.get("old"), sizes.get("new")
    if isinstance(old, int) and isinstance(new, int) and new < old:
        row.findings.append(Finding("risk", f"the new cluster has fewer brokers ({new}) than the old ({old})"))
    if isinstance(new, int) and new < e.plan.spec.mirror.replication_factor:
        row.findings.append(Finding("blocker", f"mirror.replication_factor {e.plan.spec.mirror.replication_factor} "
                                    f"needs at least that many brokers; the new cluster has {new}"))
    return row
