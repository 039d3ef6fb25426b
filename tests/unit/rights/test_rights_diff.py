"""The rights diff and audit, on in-memory inventories (the real clusters: test_zookeeper_rights.py)."""

from __future__ import annotations

from cutover.rights.audit import compare
from cutover.rights.authorizer import Acl, Authorizer
from cutover.rights.diff import Selected, diff
from cutover.rights.inventory import Inventory

SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}
MTLS = {"security.protocol": "SSL", "ssl.certificate.location": "c.pem"}
SELECTED = Selected(("orders", "secret"), ("billing-1",))
MAP = {"User:app": "User:app-tls", "User:tx": "User:tx-tls"}


def acl(rtype: str, name: str, principal: str, op: str, permission: str = "ALLOW", pattern: str = "LITERAL") -> Acl:
    return Acl(rtype, name, pattern, principal, "*", op, permission)  # type: ignore[arg-type]


OLD_ACLS = [
    acl("TOPIC", "orders", "User:app", "READ"),
    acl("GROUP", "billing", "User:app", "READ", pattern="PREFIXED"),
    acl("TOPIC", "orders", "User:tx", "WRITE"),
    acl("TRANSACTIONAL_ID", "tx-", "User:tx", "WRITE", pattern="PREFIXED"),
    acl("CLUSTER", "kafka-cluster", "User:tx", "IDEMPOTENT_WRITE"),
    acl("TOPIC", "*", "User:spy", "READ"),
    acl("TOPIC", "secret", "User:spy", "READ", permission="DENY"),
    acl("TOPIC", "elsewhere", "User:other", "READ"),  # not the selection's
]


def inventory(side: str, acls: list[Acl], scram: dict[str, tuple[tuple[str, int], ...]] | None = None,
              allow_if_no_acl: bool = False, quotas: dict | None = None) -> Inventory:  # type: ignore[type-arg]
    return Inventory(side, Authorizer.of(acls, ["User:admin"], allow_if_no_acl), quotas or {},  # type: ignore[arg-type]
                     scram or {}, {"ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT"})


def renamed(acls: list[Acl]) -> list[Acl]:
    return [Acl(a.resource_type, a.name, a.pattern, MAP.get(a.principal, a.principal), a.host, a.operation,
                a.permission) for a in acls]


def test_every_acl_kind_is_carried_under_the_mapped_principal_and_nothing_outside_the_selection() -> None:
    old = inventory("old", OLD_ACLS, scram={"spy": (("SCRAM-SHA-512", 8192),)},
                    quotas={(("user", "app"),): {"producer_byte_rate": 1024.0}, (("user", "other"),): {"x": 1.0}})
    new = inventory("new", [acl("TOPIC", "orders", "User:app-tls", "WRITE")])
    found = diff(old, new, SELECTED, MAP, SASL, MTLS, {})
    created = {c.acl for c in found.create if c.acl}
    assert created == set(renamed(OLD_ACLS[:-1]))  # WRITE, DENY, PREFIXED, group, txn id, cluster: all kept
    assert [c.acl for c in found.extra] == [acl("TOPIC", "orders", "User:app-tls", "WRITE")]
    quota = [c for c in found.create if c.entity]
    assert [(c.entity, c.quotas) for c in quota] == [((("user", "app-tls"),), (("producer_byte_rate", 1024.0),))]
    assert [(g.principal, g.what) for g in found.cannot] == [("User:spy", "SCRAM user spy (SCRAM-SHA-512, 8192 "
                                                               "iterations)")]
    assert any("User:spy keeps its name" in n for n in found.notes)
    with_password = diff(old, new, SELECTED, MAP, SASL, MTLS, {"spy": "SPY_PASSWORD"})
    assert [c.scram for c in with_password.create if c.scram] == [("spy", "SCRAM-SHA-512", 8192, "SPY_PASSWORD")]
    assert not with_password.cannot


def test_the_audit_finds_a_left_out_group_acl_and_an_extra_grant() -> None:
    old = inventory("old", OLD_ACLS)
    faithful = renamed(OLD_ACLS[:-1])
    findings, counts = compare(old, inventory("new", faithful), SELECTED, MAP)
    assert findings == [] and counts["decisions"] > 50  # the DENY beside the wildcard ALLOW holds on both
    left_out = [a for a in faithful if a.resource_type != "GROUP"] + [acl("TOPIC", "orders", "User:tx-tls", "READ")]
    findings, _ = compare(old, inventory("new", left_out), SELECTED, MAP)
    got = {(f.kind, f.principal, f.resource_type, f.resource, f.operation) for f in findings}
    assert got == {("missing", "User:app", "GROUP", "billing-1", "READ"),
                   ("missing", "User:app", "GROUP", "billing-1", "DESCRIBE"),
                   ("missing", "User:app", "GROUP", "billing", "READ"),
                   ("missing", "User:app", "GROUP", "billing", "DESCRIBE"),
                   ("extra", "User:tx", "TOPIC", "orders", "READ")}


def test_allow_everyone_if_no_acl_found_on_the_target_lets_anyone_in() -> None:
    old = inventory("old", OLD_ACLS)
    new = inventory("new", [a for a in renamed(OLD_ACLS[:-1]) if a.resource_type != "TRANSACTIONAL_ID"],
                    allow_if_no_acl=True)
    findings, _ = compare(old, new, SELECTED, MAP)
    anyone = {(f.resource_type, f.operation) for f in findings if f.principal == "User:*"}
    assert ("TRANSACTIONAL_ID", "WRITE") in anyone  # a transactional id with no ACL left: open to everyone


def test_a_quota_is_described_with_its_exact_value_never_rounded() -> None:
    from cutover.common import exact
    from cutover.rights.diff import Change

    change = Change("quota", "", entity=(("client-id", "app"),), quotas=(
        ("consumer_byte_rate", 1048576.0), ("producer_byte_rate", 3e9), ("request_percentage", 12.345678),
        ("controller_mutation_rate", None)))
    assert change.describe() == ("quota of client-id 'app': consumer_byte_rate=1048576, producer_byte_rate=3000000000, "
                                 "request_percentage=12.345678, controller_mutation_rate=(removed)")
    assert [exact(v) for v in (0.1, 2.5e-07, 1e21, 7)] == ["0.1", "2.5e-07", "1000000000000000000000", "7"]
