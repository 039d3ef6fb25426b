"""What a Kafka-compatible cluster can do, asked of the cluster itself.

Kafka-compatible platforms differ: some have no transactions, no ACL or SCRAM admin APIs, no
DescribeProducers. cutover asks before it relies on any of them, in two ways:

- the APIs its ApiVersions answer lists (read-only: `plan check`), and
- a small real probe in a scratch topic deleted after (`cutover assess`): records written with a
  timestamp and headers, read back; a transaction committed and one aborted, read with
  read_committed; where the markers sit in the log.

Each capability says what cutover needs it for and what a user loses without it
(`CAPABILITIES`). A command that needs one refuses at its start with that reason
(`require`), never deep inside on an unsupported API.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cutover.errors import Refused

#: ApiVersions' API keys (Kafka's protocol, `org.apache.kafka.common.protocol.ApiKeys`).
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit", 29: "DescribeAcls",
    30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs", 33: "AlterConfigs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 42: "DeleteGroups", 44: "IncrementalAlterConfigs", 47: "OffsetDelete",
    50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials", 60: "DescribeCluster",
    61: "DescribeProducers", 66: "ListTransactions", 68: "ConsumerGroupHeartbeat",
}


@dataclass(frozen=True)
class Capability:
    """One thing a target may or may not do: what tells, what cutover needs it for, what happens without."""

    name: str
    #: The APIs it needs (ApiVersions keys); empty: only the real probe tells.
    apis: tuple[int, ...]
    needed_for: str
    #: What a user cannot have on a cluster without it.
    without: str
    #: What cutover does there: refuses (and which command), or what it does instead and what that keeps.
    cutover_does: str
    #: Whether the real probe (a scratch topic) tells more than the API list.
    probed: bool = False


CAPABILITIES: tuple[Capability, ...] = (
    Capability("transactions", (22, 24, 25, 26, 28),
               "the mirror writes each batch of records and its own progress in one transaction",
               "the mirror cannot write records and progress atomically, nor can the broker fence a second "
               "process of one shard",
               "cutover mirror refuses this cluster as its target (exit 3) before it writes anything, unless the plan "
               "says mirror.mode: idempotent: idempotent writes, the progress written after its records, and at a "
               "restart the records written past it matched to the source by content and recorded, never written "
               "again (still exactly once); a second process of one shard is found at its next group sync, not "
               "fenced", probed=True),
    Capability("read-committed", (), "readers and the mirror's reverse direction skip aborted records",
               "a read_committed consumer sees records of aborted transactions",
               "cutover mirror --reverse refuses to read this cluster (exit 3): it would copy aborted records",
               probed=True),
    Capability("timestamps", (), "records keep the timestamps their producers gave them",
               "records' timestamps change on the way: time-based lookups (offsets for a time) and retention "
               "see other times than on the old cluster", "verify and drills report the difference", probed=True),
    Capability("headers", (), "records keep their headers", "headers are lost on the way",
               "cutover mirror refuses this cluster as its target (exit 3): a record would lose its headers",
               probed=True),
    Capability("idempotent-producer", (22,), "the mirror's writes and the drills' traffic are idempotent",
               "a retried write may be written twice", "cutover mirror refuses this cluster as its target (exit 3)"),
    Capability("describe-producers", (61,), "assess and promote's freeze see who still writes to a partition",
               "who writes cannot be seen", "assess gives the writers row as unknown, naming the API"),
    Capability("list-transactions", (66,), "assess and promote see open transactions before the freeze",
               "open transactions cannot be listed", "assess gives the writers row as unknown, naming the API"),
    Capability("acls", (29, 30, 31), "rights plan/apply/audit copy principals' rights",
               "rights cannot be read or copied by cutover", "rights apply and audit refuse, naming the API"),
    Capability("scram-admin", (50, 51), "rights apply creates SCRAM users on the target",
               "SCRAM users must be made with the platform's own tools", "rights apply refuses users, naming the API"),
    Capability("incremental-configs", (44,), "the mirror copies topic configs as they change",
               "topic configs are not kept in step", "the mirror warns and copies configs only at topic creation"),
    Capability("create-partitions", (37,), "the mirror follows partitions added on the old cluster",
               "a partition added on the old cluster is not followed",
               "the mirror stops, naming the topic, when the old cluster's topic grows"),
    Capability("delete-records", (21,), "drills replay from a known offset after a cut", "no log truncation",
               "the drills that need it are skipped, naming the API"),
    Capability("new-consumer-groups", (68,), "KIP-848 consumer groups (group.protocol=consumer)",
               "only classic consumer groups", "groups are translated with the classic protocol's offsets"),
)
BY_NAME = {c.name: c for c in CAPABILITIES}
#: What the mirror needs of its target: one transaction per batch (records and progress together),
#: idempotent writes, and every header kept.
MIRROR_NEEDS = ("transactions", "idempotent-producer", "headers")


def mirror_needs(mode: str) -> tuple[str, ...]:
    """What the mirror needs of its target in a plan's mirror.mode: idempotent mode does without transactions."""
    return MIRROR_NEEDS if mode == "transactional" else tuple(n for n in MIRROR_NEEDS if n != "transactions")


@dataclass(frozen=True)
class Finding:
    """A capability's answer on one cluster: True, False or None (not known), and what showed it."""

    capability: Capability
    supported: bool | None
    evidence: str

    def as_dict(self) -> dict[str, Any]:
        c = self.capability
        return {"capability": c.name, "supported": self.supported, "evidence": self.evidence,
                "needed_for": c.needed_for,
                **({"without": c.without, "cutover_does": c.cutover_does} if self.supported is not True else {})}


@dataclass
class Report:
    """A cluster's capabilities: the APIs it lists, each capability's finding, and the probe's facts."""

    cluster: str
    apis: dict[int, tuple[int, int]] | None
    findings: list[Finding]
    #: What the real probe saw besides: where the transaction markers sit (offsets), and so on.
    facts: dict[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Finding:
        return next(f for f in self.findings if f.capability.name == name)

    def missing(self) -> list[Finding]:
        return [f for f in self.findings if f.supported is False]

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "findings": [f.as_dict() for f in self.findings], "facts": self.facts,
                "apis": None if self.apis is None else
                {API_NAMES.get(k, str(k)): list(v) for k, v in sorted(self.apis.items())}}


def api_versions(props: Mapping[str, str], timeout: float) -> dict[int, tuple[int, int]] | None:
    """{api key: (min, max)} from the first bootstrap server's ApiVersions (v0) answer, over TLS when the
    properties say so; None when it gives no Kafka answer within `timeout`."""
    from cutover.kafka import listener
    from cutover.kafka import tls as client_tls

    server = listener.first_server(props)
    if server is None:
        return None
    try:
        tls = client_tls.context(props) if client_tls.uses_tls(props) else None
    except (OSError, ssl.SSLError, ValueError):  # key files that cannot be read: no answer, as for a handshake
        return None
    return listener.api_versions(*server, timeout, tls)


def from_apis(cluster: str, apis: dict[int, tuple[int, int]] | None) -> Report:
    """What the API list alone tells: a capability whose APIs are all listed is supported (the real
    probe may still find otherwise); one with an API missing is not; a probe-only one is not known."""
    findings = []
    for c in CAPABILITIES:
        if apis is None:
            findings.append(Finding(c, None, "the cluster gave no ApiVersions answer"))
        elif not c.apis:
            findings.append(Finding(c, None, "told only by the real probe (cutover assess)"))
        else:
            absent = [API_NAMES.get(k, str(k)) for k in c.apis if k not in apis]
            findings.append(Finding(c, not absent, f"ApiVersions lacks {', '.join(absent)}" if absent else
                                    f"ApiVersions lists {', '.join(API_NAMES.get(k, str(k)) for k in c.apis)}"))
    return Report(cluster, apis, findings)


def listed(props: Mapping[str, str], cluster: str, timeout: float) -> Report:
    """The read-only answer: the API list (`plan check`)."""
    return from_apis(cluster, api_versions(props, timeout))


def probe(props: Mapping[str, str], cluster: str, timeout: float) -> Report:
    """The API list, then the real probe in a scratch topic (deleted after, also when the probe fails)."""
    from cutover.kafka import capability_probe

    report = listed(props, cluster, timeout)
    if report.apis is None:
        return report
    topic = f"__cutover-probe-{uuid.uuid4().hex[:10]}"
    seen, facts = capability_probe.run(props, topic, timeout,
                                       transactions=report.get("transactions").supported is True)
    return merge(report, seen, facts)


def merge(report: Report, seen: Mapping[str, tuple[bool | None, str]],
          facts: Mapping[str, Any] | None = None) -> Report:
    """The API list's findings with the real probe's answers over them; where the probe could not tell, the
    list's answer stands, or (a capability only the probe tells) the probe's reason why not."""
    out = []
    for f in report.findings:
        answer = seen.get(f.capability.name)
        if answer is None or (answer[0] is None and f.supported is not None):
            out.append(f)  # the list's answer stands where the probe could not tell
        else:
            out.append(Finding(f.capability, answer[0], answer[1]))
    return Report(report.cluster, report.apis, out, {**report.facts, **dict(facts or {}), **(
        {"probe": {k: v[1] for k, v in seen.items()}} if seen else {})})


def require(report: Report, names: Iterable[str], command: str) -> None:
    """Refuse `command` when the cluster lacks any of `names` (exit 3), with each one's reason."""
    missing = [report.get(n) for n in names if report.get(n).supported is False]
    if missing:
        why = "; ".join(f"{f.capability.name}: {f.evidence} ({f.capability.without})" for f in missing)
        fix = ("choose a target that has them, or see docs/limitations.md for what cutover keeps on this platform")
        if [f.capability.name for f in missing] == ["transactions"]:
            fix = ("set mirror.mode: idempotent in the plan (exactly once without transactions: see "
                   "docs/guide/platforms.md), or choose a target that has transactions")
        raise Refused(f"{command} cannot run on the {report.cluster} cluster: {why}", fix=fix)


def markdown() -> str:
    """The capability table of docs/platforms.md, from `CAPABILITIES` itself (docs/hooks.py)."""
    rows = ["| capability | told by | cutover needs it for | without it | cutover then |", "|---|---|---|---|---|"]
    for c in CAPABILITIES:
        told = ", ".join(API_NAMES[k] for k in c.apis) or "the real probe"
        told += " and the real probe" if c.probed and c.apis else ""
        rows.append(f"| `{c.name}` | {told} | {c.needed_for} | {c.without} | {c.cutover_does} |")
    return "\n".join(rows)

