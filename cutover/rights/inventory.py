"""What one cluster says about rights: its ACLs, client quotas and SCRAM users, and how it
authorizes (its authorizer, and what the plan declares of super.users, which no cluster reveals:
DescribeConfigs answers super.users and allow.everyone.if.no.acl.found without their values).
Read-only; every read names the right it needs when the cluster refuses it.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from cutover.errors import RightsDenied
from cutover.kafka.clients import ClusterRef, metadata, result
from cutover.plan import Plan
from cutover.plan.model import ClusterSide
from cutover.rights import quotas as quota_api
from cutover.rights.authorizer import Acl, Authorizer

#: Kafka calls the cluster resource CLUSTER; confluent-kafka calls it BROKER.
_TO_KAFKA = {"BROKER": "CLUSTER"}
_FROM_KAFKA = {"CLUSTER": "BROKER"}
#: The broker settings that say how a cluster derives principals and authorizes them.
PRINCIPAL_SETTINGS = ("authorizer.class.name", "ssl.principal.mapping.rules",
                      "sasl.kerberos.principal.to.local.rules", "sasl.enabled.mechanisms")


@dataclass(frozen=True)
class Inventory:
    side: ClusterSide
    authorizer: Authorizer
    quotas: quota_api.Quotas
    #: SCRAM user -> ((mechanism, iterations), ...)
    scram: dict[str, tuple[tuple[str, int], ...]]
    #: PRINCIPAL_SETTINGS as the cluster reports them (None: not reported)
    settings: dict[str, str | None] = field(default_factory=dict)

    @property
    def acls(self) -> tuple[Acl, ...]:
        return self.authorizer.acls


def read(plan: Plan, side: ClusterSide, timeout: float, quotas: bool = True) -> Inventory:
    """The cluster's whole rights state (the plan's selection is applied later, by the diff);
    without `quotas`, its client quotas are left unread (empty)."""
    from cutover.kafka.clients import admin

    ref = ClusterRef.of(plan, side)
    client = admin(ref)
    rights = plan.spec.rights
    allowed_to(ref, client, "DESCRIBE", "reading its ACLs", timeout)
    acls = read_acls(ref, client, timeout)
    settings = _settings(ref, client, timeout)
    # A cluster without an authorizer answers DescribeAcls with no ACLs (not SECURITY_DISABLED, as
    # Kafka 4.1 and 3.9 were seen to here): its authorizer.class.name, empty, says so.
    enabled = acls is not None and bool(settings.get("authorizer.class.name"))
    authorizer = Authorizer.of(acls or (), rights.super_users_of(side) if rights else (),
                               rights.allow_if_no_acl_of(side) if rights else False, enabled)
    found = quota_api.describe(ref, timeout) if quotas else {}
    return Inventory(side, authorizer, found, read_scram(ref, client, timeout), settings)


def allowed_to(ref: ClusterRef, client: AdminClient, operation: str, doing: str, timeout: float) -> None:
    """Refuse unless the cluster says (KIP-430) cutover's principal may do `operation` on it. Needed
    before reading ACLs: a ZooKeeper-mode 3.9 cluster answers DescribeAcls from a principal without
    DESCRIBE on the cluster with no ACLs at all, not an error, and an inventory would be empty. A
    broker lists the operations only to a principal with DESCRIBE (or one older than Kafka 2.3)."""
    try:
        described = result(ref, client, client.describe_cluster(include_authorized_operations=True,
                                                                request_timeout=timeout), timeout + 5, doing)
    except KafkaException as exc:
        raise failure(ref, exc, doing, f"{operation} on the CLUSTER resource", client) from None
    except concurrent.futures.TimeoutError as exc:
        raise ref.failure(exc, doing, client) from None
    ops = {str(getattr(op, "name", op)) for op in (described.authorized_operations or [])}
    if not ops & {operation, "ALL"}:  # no list at all: the broker lists them only to a principal with DESCRIBE
        may = ", ".join(sorted(ops)) if described.authorized_operations is not None else "not DESCRIBE"
        raise RightsDenied(f"{ref.describe()} refused cutover's principal ({_principal(ref)}) {doing}: it lacks "
                           f"{operation} on the CLUSTER resource (it may: {may or 'nothing'})",
                           fix=f"grant it {operation} on the CLUSTER resource on the {ref.name} cluster (cutover "
                               "plan check lists every right `cutover rights` needs)")


def _principal(ref: ClusterRef) -> str:
    return ref.properties.get("sasl.username") or ref.properties.get("ssl.certificate.location", "?")


def read_acls(ref: ClusterRef, client: AdminClient, timeout: float) -> list[Acl] | None:
    """Every ACL of the cluster; None when it runs no authorizer (then it enforces none)."""
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                  AclOperation.ANY, AclPermissionType.ANY)
    try:
        bindings = result(ref, client, client.describe_acls(everything, request_timeout=timeout), timeout + 5,
                          "reading its ACLs")
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.SECURITY_DISABLED:
            return None
        raise failure(ref, exc, "reading its ACLs", "DESCRIBE on the CLUSTER resource", client) from None
    except concurrent.futures.TimeoutError as exc:
        raise ref.failure(exc, "reading its ACLs", client) from None
    return [from_binding(b) for b in bindings]


def read_scram(ref: ClusterRef, client: AdminClient, timeout: float) -> dict[str, tuple[tuple[str, int], ...]]:
    try:
        every = client.describe_user_scram_credentials(request_timeout=timeout)  # no users: one future for all
        assert isinstance(every, concurrent.futures.Future)
        found: dict[str, Any] = result(ref, client, every, timeout + 5, "reading its SCRAM users")
    except KafkaException as exc:
        raise failure(ref, exc, "reading its SCRAM users", "DESCRIBE on the CLUSTER resource", client) from None
    except concurrent.futures.TimeoutError as exc:
        raise ref.failure(exc, "reading its SCRAM users", client) from None
    return {user: tuple(sorted((i.mechanism.name.replace("_", "-"), int(i.iterations))
                               for i in d.scram_credential_infos))
            for user, d in sorted(found.items())}


def _settings(ref: ClusterRef, client: AdminClient, timeout: float) -> dict[str, str | None]:
    doing = "reading its broker settings"
    brokers = metadata(ref, client, timeout, doing).brokers
    resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
    try:
        configs = result(ref, client, client.describe_configs([resource], request_timeout=timeout)[resource],
                         timeout + 5, doing)
    except KafkaException as exc:
        raise failure(ref, exc, doing, "DESCRIBE_CONFIGS on the CLUSTER resource", client) from None
    except concurrent.futures.TimeoutError as exc:
        raise ref.failure(exc, doing, client) from None
    return {k: (configs[k].value if k in configs else None) for k in PRINCIPAL_SETTINGS}


def failure(ref: ClusterRef, exc: KafkaException, doing: str, right: str, client: AdminClient) -> Exception:
    err = exc.args[0]
    if isinstance(err, KafkaError) and err.code() in (KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                                                       KafkaError.TOPIC_AUTHORIZATION_FAILED):
        return RightsDenied(f"{ref.describe()} refused cutover's principal ({_principal(ref)}) {doing}: {err.str()}",
                            fix=f"grant it {right} on the {ref.name} cluster (cutover plan check lists every "
                                "right `cutover rights` needs)")
    return ref.failure(exc, doing, client)


def from_binding(b: AclBinding) -> Acl:
    def name(value: Any) -> str:
        return str(getattr(value, "name", value))

    restype = name(b.restype)
    return Acl(_TO_KAFKA.get(restype, restype), str(b.name), name(b.resource_pattern_type),  # type: ignore[arg-type]
               str(b.principal), str(b.host), name(b.operation), name(b.permission_type))  # type: ignore[arg-type]


def to_binding(a: Acl) -> AclBinding:
    return AclBinding(ResourceType[_FROM_KAFKA.get(a.resource_type, a.resource_type)], a.name,
                      ResourcePatternType[a.pattern], a.principal, a.host, AclOperation[a.operation],
                      AclPermissionType[a.permission])


def to_filter(a: Acl) -> AclBindingFilter:
    """A filter matching exactly this one binding (for a delete)."""
    return AclBindingFilter(ResourceType[_FROM_KAFKA.get(a.resource_type, a.resource_type)], a.name,
                            ResourcePatternType[a.pattern], a.principal, a.host, AclOperation[a.operation],
                            AclPermissionType[a.permission])


def principals_of(acls: Iterable[Acl]) -> set[str]:
    return {a.principal for a in acls}
