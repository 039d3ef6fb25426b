"""Kafka's ACL authorizer, as a model: what a principal may do to a resource, given a cluster's ACLs.

The rules are those of Kafka's StandardAuthorizer (KRaft; AclAuthorizer in ZooKeeper mode
decides the same way), so that `cutover rights audit` can compute the effective rights on
both clusters and compare them, principal by principal, resource by resource:

- a super user (`super.users`) may do everything;
- the ACLs that apply to a resource: LITERAL on its name, LITERAL on the wildcard `*`,
  PREFIXED on any prefix of its name (the whole name included);
- of those, the ones for the principal (or the wildcard principal `User:*`) and the host
  (or `*`): any DENY for the operation (or ALL) denies, before any ALLOW;
- an ALLOW for the operation (or ALL) allows; an ALLOW of READ, WRITE, DELETE or ALTER also
  allows DESCRIBE, and one of ALTER_CONFIGS also DESCRIBE_CONFIGS (a DENY implies nothing);
- no ALLOW: denied, unless the resource has no ACL at all (for anyone), when the cluster's
  `allow.everyone.if.no.acl.found` decides.

Pure: no cluster is asked here. Not modelled: custom authorizers, and principals a cluster
derives with its own rules (`ssl.principal.mapping.rules`, `sasl.kerberos.principal.to.local.rules`):
the audit takes the principal names the plan's principal map gives.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

ResourceType = Literal["TOPIC", "GROUP", "TRANSACTIONAL_ID", "CLUSTER", "DELEGATION_TOKEN", "USER"]
PatternType = Literal["LITERAL", "PREFIXED"]
Permission = Literal["ALLOW", "DENY"]
#: Kafka's ACL operations (AclOperation), but UNKNOWN and ANY, which no ACL holds.
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS")
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
IMPLIES_DESCRIBE = frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"})
IMPLIES_DESCRIBE_CONFIGS = frozenset({"DESCRIBE_CONFIGS", "ALTER_CONFIGS"})


@dataclass(frozen=True, order=True)
class Acl:
    """One ACL binding: a resource pattern and an entry (principal, host, operation, permission)."""

    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str
    host: str
    operation: str
    permission: Permission

    def covers(self, resource_type: str, name: str) -> bool:
        """Whether this ACL's pattern applies to the resource (whoever asks)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern == "LITERAL":
            return self.name in (name, WILDCARD)
        return name.startswith(self.name)

    def describe(self) -> str:
        return (f"{self.permission} {self.principal} {self.operation} on {self.resource_type} {self.pattern} "
                f"'{self.name}' from host {self.host}")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    #: what decided: "super user", "allow.everyone.if.no.acl.found", "no ACL allows it", or the ACL
    rule: str


@dataclass(frozen=True)
class Authorizer:
    """One cluster's authorization state."""

    acls: tuple[Acl, ...]
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    #: False when the cluster runs no authorizer at all: then everyone may do everything.
    enabled: bool = True

    @classmethod
    def of(cls, acls: Iterable[Acl], super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
           enabled: bool = True) -> Authorizer:
        return cls(tuple(sorted(set(acls))), frozenset(super_users), allow_if_no_acl, enabled)

    def authorize(self, principal: str, operation: str, resource_type: str, name: str,
                  host: str = WILDCARD) -> Decision:
        """May `principal`, connecting from `host` (`*`: any host, only ACLs for every host count), do
        `operation` on the resource? The same answer Kafka's StandardAuthorizer gives."""
        if not self.enabled:
            return Decision(True, "no authorizer on the cluster")
        if principal in self.super_users:
            return Decision(True, "super user")
        covering = [a for a in self.acls if a.covers(resource_type, name)]
        allow: Acl | None = None
        for acl in covering:
            result = _result(acl, principal, host, operation)
            if result == "DENY":
                return Decision(False, acl.describe())
            if result == "ALLOW" and allow is None:
                allow = acl
        if allow is not None:
            return Decision(True, allow.describe())
        if not covering:
            if self.allow_everyone_if_no_acl_found:
                return Decision(True, "allow.everyone.if.no.acl.found (the resource has no ACL)")
            return Decision(False, "the resource has no ACL, and allow.everyone.if.no.acl.found is false")
        return Decision(False, "no ACL allows it")


def _result(acl: Acl, principal: str, host: str, operation: str) -> Permission | None:
    """What one ACL that covers the resource says about this request (None: nothing)."""
    if acl.principal not in (principal, WILDCARD_PRINCIPAL):
        return None
    if acl.host not in (WILDCARD, host):
        return None
    if acl.operation != "ALL":
        if acl.permission == "ALLOW":
            if operation == "DESCRIBE":
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == "DESCRIBE_CONFIGS":
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif acl.operation != operation:
                return None
        elif acl.operation != operation:
            return None
    return acl.permission
