"""`cutover readers find`: what on the old cluster suggests a reader that keeps its own positions.

A migration that moves consumer groups exactly still leaves behind any reader whose progress is
not in a group. The cluster shows traces of them; each trace found is named with its evidence:

- groups named `spark-kafka-source-*` with no commits: Spark's Kafka source (its positions are
  in the query's checkpoint; `readers translate` moves a declared one);
- Kafka Streams internal topics (`<application.id>-...-changelog`, `-repartition`) of an
  application the plan does not declare: its stores keep changelog offsets in their state directory;
- Kafka Connect's internal topics (config, offsets, status): source connectors keep their
  positions in the offsets topic;
- groups with members reading selected topics but no commits on them: a reader that commits
  nowhere, or elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from cutover.kafka.clients import DEFAULT_TIMEOUT, ClusterRef
from cutover.kafka.inspect import list_groups, partition_counts
from cutover.kafka.offsets import groups_info, readers
from cutover.plan import Plan

_STREAMS = re.compile(r"^(?P<prefix>.+)-(?P<kind>changelog|repartition)$")
_CONNECT = re.compile(r"^(?P<prefix>.*?)[-_.]?(?P<kind>configs?|offsets|status(?:es)?)$")
SPARK_PREFIX = "spark-kafka-source-"


@dataclass(frozen=True)
class Finding:
    #: spark-checkpoint, kafka-streams, connect or uncommitted-group.
    kind: str
    #: The group, application or topic prefix it is about.
    name: str
    evidence: str
    what_to_do: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Found:
    """What `readers find` read of the old cluster and found there (`as_dict` at the JSON edge)."""

    topics: int
    groups: int
    #: The readers the plan declares, by name.
    declared: tuple[str, ...]
    findings: tuple[Finding, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": "old", "topics": self.topics, "groups": self.groups, "declared": list(self.declared),
                "findings": [f.as_dict() for f in self.findings]}


def find(plan: Plan, timeout: float = DEFAULT_TIMEOUT) -> Found:
    """Traces on the old cluster of readers outside groups, and the readers the plan declares."""
    ref = ClusterRef.of(plan, "old")
    topics = sorted(partition_counts(ref, timeout))
    groups = list_groups(ref, timeout)
    infos = groups_info(ref, groups, timeout)
    found: list[Finding] = []
    declared = [r.name for r in plan.spec.readers]
    for g in groups:
        if g.startswith(SPARK_PREFIX) and not infos[g].offsets:
            found.append(Finding("spark-checkpoint", g, f"group {g}: Spark's Kafka source, {infos[g].members} "
                                 "member(s), no commits (its positions are in the query's checkpoint)",
                                 "declare the query under readers (kind spark-checkpoint, its checkpointLocation)"
                                 + (f"; declared: {', '.join(declared)}" if declared else "")))
    streams_apps = {r.application_id for r in plan.spec.readers if r.kind == "kafka-streams"}
    found += [f for f in _streams(topics, groups, infos) if f.name not in streams_apps]
    connect_topics = {r.offsets_topic or "connect-offsets" for r in plan.spec.readers if r.kind == "connect"}
    found += _connect(topics, connect_topics)
    selected = plan.spec.topics.matches
    for g, read in readers(ref, [g for g in groups if not g.startswith(SPARK_PREFIX)], selected, timeout).items():
        committed = {t for t, _p in infos[g].offsets}
        missing = [t for t in read if t not in committed]
        if missing:
            found.append(Finding("uncommitted-group", g, f"group {g}: {infos[g].members} member(s) reading "
                                 f"{', '.join(missing)}, no commits on them",
                                 "find where this reader keeps its positions: the mirror moves only commits"))
    return Found(len(topics), len(groups), tuple(declared), tuple(found))


def _streams(topics: list[str], groups: list[str], infos: dict[str, Any]) -> list[Finding]:
    apps: dict[str, list[str]] = {}
    for t in topics:
        m = _STREAMS.match(t)
        if m is None:
            continue
        # application.id is the name's prefix: the longest group that prefixes it, else what precedes -KSTREAM-
        app = max((g for g in groups if t.startswith(f"{g}-")), key=len, default=None)
        if app is None:
            app = m.group("prefix").split("-KSTREAM-")[0] if "-KSTREAM-" in t else m.group("prefix")
        apps.setdefault(app, []).append(t)
    out = []
    for app, internal in sorted(apps.items()):
        group = f"group {app} with {infos[app].members} member(s)" if app in infos else "no group of that name"
        out.append(Finding("kafka-streams", app, f"internal topics {', '.join(sorted(internal))}; {group}",
                           "declare it under readers (kind kafka-streams, its application_id and state_dir): "
                           "its stores' changelog offsets are in each task's .checkpoint under its state "
                           "directory, and point at other records on the new cluster unless they are moved"))
    return out


def _connect(topics: list[str], declared: set[str]) -> list[Finding]:
    """A worker's three internal topics, unless a connect reader declares its offsets topic."""
    by_prefix: dict[str, dict[str, str]] = {}
    for t in topics:
        m = _CONNECT.match(t)
        if m is not None:
            kind = next(k for k in ("config", "offset", "status") if m.group("kind").startswith(k))
            by_prefix.setdefault(m.group("prefix"), {})[kind] = t
    out = []
    for prefix, kinds in sorted(by_prefix.items()):
        if {"config", "offset", "status"} <= set(kinds) and kinds["offset"] not in declared:  # not a look-alike
            names = ", ".join(kinds[k] for k in ("config", "offset", "status"))
            out.append(Finding("connect", prefix or "connect", f"Kafka Connect's internal topics {names}",
                               "select the three topics so the mirror copies them exactly, and declare the source "
                               "connectors under readers (kind connect, the workers' URLs, offsets_topic "
                               f"{kinds['offset']}): the switch checks their offsets on both clusters and on the new "
                               "worker; sink connectors follow their groups"))
    return out
