"""`cutover rights audit`: the effective rights on both clusters, principal by principal, for every
selected resource and operation, computed with the authorizer's rules (authorizer.py), and the
differences: **missing** (allowed on the source, denied on the target: blocks the switch) and
**extra** (allowed on the target only: a security finding, blocking unless the plan allows
extras). Where the plan gives a principal's credentials, a real handshake proves them.

The resources: the selected topics and groups, the group and transactional-id names the scope's
ACLs name (a prefixed pattern stands for a name of its own prefix), and the cluster. The
principals: those of the scope on either side, and any other principal (the wildcard, `User:*`,
which stands for a principal no ACL names). Hosts: an ACL for one host counts only for that
host, so the audit asks for a client from any host (`*`).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from cutover.errors import AccessDenied, CutoverError
from cutover.kafka.clients import ClusterRef, metadata, refusal
from cutover.rights.authorizer import WILDCARD, WILDCARD_PRINCIPAL, Acl
from cutover.rights.diff import Selected, in_scope
from cutover.rights.inventory import Inventory
from cutover.secrets import scrub

OPERATIONS: dict[str, tuple[str, ...]] = {
    "TOPIC": ("READ", "WRITE", "DESCRIBE", "CREATE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    "GROUP": ("READ", "DESCRIBE", "DELETE"),
    "TRANSACTIONAL_ID": ("WRITE", "DESCRIBE"),
    "CLUSTER": ("IDEMPOTENT_WRITE", "DESCRIBE", "CREATE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                "CLUSTER_ACTION"),
}
CLUSTER_NAME = "kafka-cluster"
#: Client properties that say who a client is: replaced by a principal's own credentials.
IDENTITY_KEYS = ("sasl.username", "sasl.password", "sasl.jaas.config", "ssl.certificate.location",
                 "ssl.key.location", "ssl.key.password", "ssl.certificate.pem", "ssl.key.pem",
                 "ssl.keystore.location", "ssl.keystore.password")


@dataclass(frozen=True)
class Finding:
    kind: Literal["missing", "extra", "credentials"]
    #: the principal on the source, and on the target
    principal: str
    target_principal: str
    resource_type: str = ""
    resource: str = ""
    operation: str = ""
    #: what decided, on the source and on the target
    source_rule: str = ""
    target_rule: str = ""
    #: credentials: what to do about them
    fix: str = ""

    def describe(self) -> str:
        who = self.principal if self.principal == self.target_principal else \
            f"{self.principal} ({self.target_principal} on the target)"
        if self.kind == "credentials":  # target_rule: why they do not authenticate, a sentence of its own
            return f"{who}: {self.target_rule}" + (f" (fix: {self.fix})" if self.fix else "")
        verb = "may no longer" if self.kind == "missing" else "may newly"
        return (f"{who} {verb} {self.operation} {self.resource_type} '{self.resource}' "
                f"(source: {self.source_rule}; target: {self.target_rule})")

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "principal": self.principal, "target_principal": self.target_principal,
                "resource_type": self.resource_type, "resource": self.resource, "operation": self.operation,
                "source": self.source_rule, "target": self.target_rule, "fix": self.fix}


def resources(selected: Selected, acls: Iterable[Acl]) -> list[tuple[str, str]]:
    out = {("TOPIC", t) for t in selected.topics} | {("GROUP", g) for g in selected.groups}
    out |= {(a.resource_type, a.name) for a in acls
            if a.resource_type in ("GROUP", "TRANSACTIONAL_ID") and a.name != WILDCARD}
    out.add(("CLUSTER", CLUSTER_NAME))
    return sorted(out)


def compare(source: Inventory, target: Inventory, selected: Selected,
            principal_map: Mapping[str, str]) -> tuple[list[Finding], dict[str, int]]:
    """The findings, and how many (principal, resource, operation) decisions were compared."""
    scope = in_scope(source.acls, selected)
    mapped = {a.principal: principal_map.get(a.principal, a.principal) for a in scope}
    target_scope = in_scope(target.acls, selected, mapped.values())
    inverse = {new: old for old, new in principal_map.items()}
    principals = set(mapped) | {inverse.get(a.principal, a.principal) for a in target_scope} | {WILDCARD_PRINCIPAL}
    findings: list[Finding] = []
    compared = 0
    for principal in sorted(principals):
        other = principal_map.get(principal, principal)
        for rtype, name in resources(selected, [*scope, *target_scope]):
            for op in OPERATIONS[rtype]:
                compared += 1
                was = source.authorizer.authorize(principal, op, rtype, name)
                now = target.authorizer.authorize(other, op, rtype, name)
                if was.allowed != now.allowed:
                    findings.append(Finding("missing" if was.allowed else "extra", principal, other, rtype, name,
                                            op, was.rule, now.rule))
    return findings, {"principals": len(principals), "decisions": compared}


def prove(target_props: Mapping[str, str], credentials: Mapping[str, Mapping[str, str]],
          timeout: float) -> list[Finding]:
    """A real authentication on the target for each principal with credentials in the plan, side by side: a
    broker refuses wrong credentials in well under a second, and each is named then (`metadata` reads the
    client's error callback), so the audit takes about one handshake, not one timeout per principal."""
    if not credentials:
        return []
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(credentials))) as pool:
        found = pool.map(lambda item: _prove_one(target_props, item[0], item[1], timeout), sorted(credentials.items()))
        return [f for f in found if f is not None]


def _refused_properties(principal: str, props: Mapping[str, str], text: str) -> Finding:
    """A principal's credentials librdkafka refuses to make a client of: most often ones for another kind of
    listener (a certificate where the new cluster authenticates with SASL)."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if text.startswith("sasl.username and sasl.password must be set"):
        return Finding("credentials", principal, principal, target_rule=scrub(
            f"its client properties in rights.credentials do not suit the new cluster's listener ({protocol}): {text}"),
            fix=f"give sasl.username and sasl.password for {principal} in rights.credentials (the password as "
                "${VARIABLE})")
    return Finding("credentials", principal, principal, target_rule=scrub(
        f"its client properties in rights.credentials are not accepted: {text}"),
        fix="correct them: the files must exist, and a key must match its certificate")


def _prove_one(target_props: Mapping[str, str], principal: str, creds: Mapping[str, str],
               timeout: float) -> Finding | None:
    """One principal's handshake, by a client that logs through cutover (never librdkafka's own stderr lines)."""
    props = {k: v for k, v in target_props.items() if k not in IDENTITY_KEYS}
    props.update(creds)
    ref = ClusterRef("new", props)
    try:  # a key that does not match its certificate fails here, when the client is made
        client = AdminClient(ref.config())
    except KafkaException as exc:
        return _refused_properties(principal, props, refusal(exc))
    try:
        metadata(ref, client, timeout, "listing topics")
    except AccessDenied as exc:  # before `rights apply`, the user is not on the new cluster yet
        return Finding("credentials", principal, principal, target_rule=scrub(exc.message),
                       fix=f"create the user on the new cluster (cutover rights apply --execute creates those of "
                           f"rights.scram_passwords), or correct rights.credentials of {principal}")
    except CutoverError as exc:
        return Finding("credentials", principal, principal, target_rule=scrub(exc.message), fix=exc.fix or "")
    return None
