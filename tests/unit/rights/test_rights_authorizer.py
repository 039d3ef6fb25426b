"""The authorizer model decides as Kafka's StandardAuthorizer does (metadata/.../StandardAuthorizerData)."""

from __future__ import annotations

import pytest

from cutover.rights.authorizer import Acl, Authorizer

APP = "User:orders-app"


def acl(name: str, op: str, permission: str = "ALLOW", *, rtype: str = "TOPIC", pattern: str = "LITERAL",
        principal: str = APP, host: str = "*") -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, permission)  # type: ignore[arg-type]


def may(auth: Authorizer, op: str, name: str, rtype: str = "TOPIC", principal: str = APP, host: str = "*") -> bool:
    return auth.authorize(principal, op, rtype, name, host).allowed


def test_literal_prefixed_and_wildcard_patterns_cover_what_they_name() -> None:
    auth = Authorizer.of([acl("orders", "READ"), acl("pay", "WRITE", pattern="PREFIXED"),
                          acl("*", "DESCRIBE_CONFIGS")])
    assert may(auth, "READ", "orders") and not may(auth, "READ", "orders2")  # literal: the exact name only
    assert may(auth, "WRITE", "payments") and may(auth, "WRITE", "pay") and not may(auth, "WRITE", "apay")
    assert may(auth, "DESCRIBE_CONFIGS", "anything")  # the literal wildcard name


def test_deny_wins_over_allow_whatever_the_pattern_and_a_wildcard_principal_counts() -> None:
    auth = Authorizer.of([acl("*", "ALL", principal="User:*"), acl("secret", "READ", "DENY")])
    assert not may(auth, "READ", "secret") and may(auth, "WRITE", "secret") and may(auth, "READ", "other")
    assert may(auth, "READ", "secret", principal="User:someone-else")


def test_allow_implies_describe_but_deny_implies_nothing() -> None:
    auth = Authorizer.of([acl("t", "READ"), acl("c", "ALTER_CONFIGS"), acl("d", "READ", "DENY"),
                          acl("d", "DESCRIBE", principal="User:*")])
    assert may(auth, "DESCRIBE", "t") and not may(auth, "DESCRIBE_CONFIGS", "t")
    assert may(auth, "DESCRIBE_CONFIGS", "c") and not may(auth, "DESCRIBE", "c")
    assert may(auth, "DESCRIBE", "d") and not may(auth, "READ", "d")  # a DENY READ does not deny DESCRIBE


@pytest.mark.parametrize(("allow_if_none", "expected"), [(False, False), (True, True)])
def test_a_resource_without_any_acl_follows_allow_everyone_if_no_acl_found(allow_if_none: bool,
                                                                           expected: bool) -> None:
    auth = Authorizer.of([acl("other-app-topic", "READ", principal="User:other")], allow_if_no_acl=allow_if_none)
    assert may(auth, "READ", "orphan") is expected
    # a resource with ACLs, none of them the principal's: denied whatever the setting
    assert not may(auth, "READ", "other-app-topic")


def test_hosts_super_users_groups_transactional_ids_and_the_cluster() -> None:
    auth = Authorizer.of([acl("orders-", "READ", rtype="GROUP", pattern="PREFIXED"),
                          acl("orders-tx", "WRITE", rtype="TRANSACTIONAL_ID"),
                          acl("kafka-cluster", "IDEMPOTENT_WRITE", rtype="CLUSTER"),
                          acl("t", "READ", host="10.1.1.1")], super_users=["User:admin"])
    assert may(auth, "READ", "orders-billing", "GROUP") and not may(auth, "READ", "billing", "GROUP")
    assert may(auth, "WRITE", "orders-tx", "TRANSACTIONAL_ID")
    assert may(auth, "DESCRIBE", "orders-tx", "TRANSACTIONAL_ID")
    assert may(auth, "IDEMPOTENT_WRITE", "kafka-cluster", "CLUSTER")
    assert may(auth, "READ", "t", host="10.1.1.1") and not may(auth, "READ", "t", host="10.1.1.2")
    assert not may(auth, "READ", "t")  # from any host: an ACL for one host does not say
    assert may(auth, "ALTER", "anything", "CLUSTER", principal="User:admin")
    decision = auth.authorize("User:admin", "READ", "TOPIC", "x")
    assert decision.rule == "super user"
    assert Authorizer.of([], enabled=False).authorize(APP, "WRITE", "TOPIC", "x").allowed


def test_a_decision_names_the_acl_that_made_it() -> None:
    auth = Authorizer.of([acl("*", "ALL", principal="User:*"), acl("secret", "READ", "DENY")])
    assert auth.authorize(APP, "READ", "TOPIC", "secret").rule == \
        "DENY User:orders-app READ on TOPIC LITERAL 'secret' from host *"
    assert auth.authorize(APP, "ALTER", "TOPIC", "x").rule == "ALLOW User:* ALL on TOPIC LITERAL '*' from host *"
