"""Rights move with the workload, on real brokers with ACLs enforced: the old cluster is
ZooKeeper-mode Kafka 3.9.1, three brokers, SASL_SSL (SCRAM users, AclAuthorizer); the new one
KRaft 4.1.1 with mTLS (StandardAuthorizer), where each application is a certificate whose CN
the plan's principal map names.

The principals: a consumer with READ on its topic and, through a PREFIXED group ACL, on its
groups; a transactional producer with WRITE on its transactional id and IDEMPOTENT_WRITE; a
principal with a DENY READ on one topic beside a wildcard ALLOW; a principal with a quota (and
a SCRAM user the plan gives the password of). Their real clients, with their own credentials,
are the proof.

Marked `production`: it shares test_zookeeper.py's sandbox (conftest's `zk`).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from cutover.errors import ExitCode
from cutover.kafka.clients import ClusterRef
from cutover.local import certs
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive, load_plan
from cutover.rights import inventory, quotas
from cutover.rights.authorizer import Acl
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all

pytestmark = pytest.mark.production

STORE_VAR = "CUTOVER_SANDBOX_TLS_STORE_PASSWORD"
QUOTA_VAR = "RIGHTS_QUOTA_APP_PASSWORD"


@dataclass
class World:
    box: Sandbox
    ns: str
    plan: Plan
    #: application -> SCRAM user on the old cluster
    users: dict[str, str]
    passwords: dict[str, str]
    #: application -> its principal on the new cluster
    new_principal: dict[str, str]

    @property
    def plan_file(self) -> str:
        return str(self.plan.file)

    def old_client(self, app: str, **extra: Any) -> dict[str, Any]:
        props = self.plan.cluster("old")
        return {"bootstrap.servers": props["bootstrap.servers"], "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": self.users[app],
                "sasl.password": self.passwords[app], "ssl.ca.location": props["ssl.ca.location"], **extra}

    def new_client(self, app: str, **extra: Any) -> dict[str, Any]:
        ident = certs.Identity(self.box.tls_dir, f"new-{self.new_principal[app][5:]}")
        props = self.plan.cluster("new")
        return {"bootstrap.servers": props["bootstrap.servers"], "security.protocol": "SSL",
                "ssl.ca.location": props["ssl.ca.location"], "ssl.certificate.location": str(ident.cert),
                "ssl.key.location": str(ident.key), **extra}

    def acls(self, side: str) -> set[Acl]:
        ref = ClusterRef.of(self.plan, side)  # type: ignore[arg-type]
        from cutover.kafka.clients import admin

        return set(inventory.read_acls(ref, admin(ref), 30) or [])

    def change_acls(self, side: str, create: list[Acl] = (), delete: list[Acl] = ()) -> None:  # type: ignore[assignment]
        client = AdminClient(dict(self.plan.cluster(side)))  # type: ignore[arg-type]
        if create:
            for f in client.create_acls([inventory.to_binding(a) for a in create]).values():
                f.result(timeout=30)
        if delete:
            for f in client.delete_acls([inventory.to_filter(a) for a in delete]).values():
                f.result(timeout=30)


def _acl(rtype: str, name: str, principal: str, op: str, permission: str = "ALLOW", pattern: str = "LITERAL") -> Acl:
    return Acl(rtype, name, pattern, principal, "*", op, permission)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def world(zk: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    ns = f"r{uuid.uuid4().hex[:6]}"
    tmp = tmp_path_factory.mktemp("rights")
    base = load_plan(zk.plan_file)
    old = base.cluster("old")
    apps = ("consumer", "producer", "denied", "quota", "nobody")
    users = {app: f"{ns}-{app}" for app in apps}
    passwords = {app: uuid.uuid4().hex for app in apps}
    admin_old = AdminClient(dict(old))
    iterations = {"quota": 8192}  # a SCRAM user's iterations are carried, not defaulted
    done = admin_old.alter_user_scram_credentials([
        UserScramCredentialUpsertion(users[app], ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                     iterations.get(app, 4096)),
                                     passwords[app].encode()) for app in apps])
    for f in done.values():
        f.result(timeout=30)
    for topic, parts in ((f"{ns}.orders", 3), (f"{ns}.payments", 1), (f"{ns}.secret", 1)):
        create_topic(old, topic, parts)
    produce(old, f"{ns}.orders", [{"key": f"k{i}", "value": f"order-{i}", "partition": i % 3} for i in range(30)])
    produce(old, f"{ns}.secret", [{"key": "s", "value": "secret"}])
    user = {app: f"User:{u}" for app, u in users.items()}
    world_acls = [
        _acl("TOPIC", f"{ns}.orders", user["consumer"], "READ"),
        _acl("GROUP", f"{ns}-billing", user["consumer"], "READ", pattern="PREFIXED"),
        _acl("TOPIC", f"{ns}.orders", user["producer"], "WRITE"),
        _acl("TRANSACTIONAL_ID", f"{ns}-tx", user["producer"], "WRITE"),
        _acl("CLUSTER", "kafka-cluster", user["producer"], "IDEMPOTENT_WRITE"),
        _acl("TOPIC", "*", user["denied"], "READ"),
        _acl("TOPIC", f"{ns}.secret", user["denied"], "READ", permission="DENY"),
        _acl("GROUP", f"{ns}-d", user["denied"], "READ"),
        _acl("TOPIC", f"{ns}.payments", user["quota"], "WRITE"),
    ]
    client = AdminClient(dict(old))
    for f in client.create_acls([inventory.to_binding(a) for a in world_acls]).values():
        f.result(timeout=30)
    quotas.alter(ClusterRef.of(base, "old"), {(("user", users["quota"]),): {"producer_byte_rate": 1048576.0},
                                              (("client-id", f"{ns}-client"),): {"consumer_byte_rate": 2048.0}}, 60)
    # mTLS on the new cluster: the mapped applications get certificates of their own CN; the quota
    # application keeps its name (a certificate with its user's CN), so its SCRAM user is copied too.
    new_principal = {app: f"User:{users[app]}-tls" for app in ("consumer", "producer", "denied")}
    new_principal["quota"] = user["quota"]
    store = dict(line.split("=", 1) for line in zk.secrets_file.read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    for principal in new_principal.values():
        certs.issue(zk.tls_dir, f"new-{principal[5:]}", principal[5:], store[STORE_VAR], server=False)
    env = tmp / "secrets.env"
    env.write_text(zk.secrets_file.read_text() + f"{QUOTA_VAR}={passwords['quota']}\n")
    env.chmod(0o600)
    creds = {p: {"ssl.certificate.location": str(certs.Identity(zk.tls_dir, f"new-{p[5:]}").cert),
                 "ssl.key.location": str(certs.Identity(zk.tls_dir, f"new-{p[5:]}").key)}
             for p in new_principal.values()}
    plan = derive(zk.plan_file, tmp / f"{ns}.yaml", merge=True, name=ns, env_file=str(env),
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}-.*"]},
                  mirror={"group_sync_interval": "1s"}, tables=[], gates={"quiet_period": "2s"},
                  routing={"file": str(tmp / "routing.json")},
                  switch={"journal_dir": str(tmp / "journal"), "quiet_timeout": "60s", "groups_timeout": "60s"},
                  rights={"principals": {user[a]: new_principal[a] for a in ("consumer", "producer", "denied")},
                          "scram_passwords": {users["quota"]: QUOTA_VAR}, "credentials": creds,
                          "old": {"super_users": ["User:admin"]},
                          "new": {"super_users": ["User:admin", "User:new-broker"]}})
    made = World(zk, ns, plan, users, passwords, new_principal)
    yield made
    from cutover.switch import background

    background.stop(plan)
    clean(made, ns)


def clean(world: World, prefix: str) -> None:
    """Remove the ACLs this module made (or an earlier run left) on both clusters: a reused sandbox
    would otherwise hold principals the next world's plan does not map, rightly reported as extra."""
    for side in ("old", "new"):
        world.change_acls(side, delete=[a for a in world.acls(side) if prefix in a.principal or prefix in a.name])


def _lines(report: Mapping[str, Any], principal: str, key: str) -> list[str]:
    return list(report["per_principal"].get(principal, {}).get(key, []))


def _findings(run: Any, kind: str) -> set[tuple[str, str, str, str]]:
    return {(f["principal"], f["resource_type"], f["resource"], f["operation"]) for f in run.json()[kind]}


def _group_read(props: Mapping[str, Any], topic: str, group: str, want: int, timeout: float = 60) -> Any:
    """Read `want` records as a group; returns the values, or the first error (an authorization failure)."""
    consumer = Consumer({**props, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[str] = []
    try:
        def more() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                if msg.error():
                    raise _Stop(msg.error())
                values.append(msg.value().decode())
            return len(values) >= want
        try:
            wait_for(more, timeout, f"{want} records of {topic} as group {group}")
        except _Stop as stop:
            return stop.error
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return sorted(values)


class _Stop(Exception):
    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


def test_rights_move_with_the_workload_and_the_promote_waits_for_them(world: World) -> None:
    ns, u, n = world.ns, {a: f"User:{x}" for a, x in world.users.items()}, world.new_principal
    plan = cutover("rights", "plan", "--plan", world.plan_file, "-o", "json")
    assert plan.code == 0, plan.err
    report = plan.json()
    assert report["principals"][u["consumer"]] == n["consumer"]
    assert f"ALLOW {n['consumer']} READ on GROUP PREFIXED '{ns}-billing' from host *" in \
        _lines(report, n["consumer"], "create")
    assert {f"ALLOW {n['producer']} WRITE on TRANSACTIONAL_ID LITERAL '{ns}-tx' from host *",
            f"ALLOW {n['producer']} IDEMPOTENT_WRITE on CLUSTER LITERAL 'kafka-cluster' from host *",
            f"ALLOW {n['producer']} WRITE on TOPIC LITERAL '{ns}.orders' from host *"} <= \
        set(_lines(report, n["producer"], "create"))
    assert f"DENY {n['denied']} READ on TOPIC LITERAL '{ns}.secret' from host *" in \
        _lines(report, n["denied"], "create")
    quota_lines = _lines(report, u["quota"], "create")
    assert f"quota of user '{world.users['quota']}': producer_byte_rate=1048576" in quota_lines
    assert f"SCRAM user {world.users['quota']} (SCRAM-SHA-256, 8192 iterations)" in quota_lines
    assert f"quota of client-id '{ns}-client': consumer_byte_rate=2048" in \
        _lines(report, "(client-id and ip quotas)", "create")
    cannot = {p: parts["cannot"] for p, parts in report["per_principal"].items() if parts["cannot"]}
    assert not set(cannot) & {*u.values(), *n.values()}, cannot
    # The sandbox's reader (its wildcard topic ACL covers the selection) has no password in the plan.
    assert "a SCRAM password is never readable" in cannot["User:reader"][0]
    assert any(f"SCRAM user {world.users['consumer']} is not copied" in note for note in report["notes"])

    before = cutover("rights", "audit", "--plan", world.plan_file, "-o", "json")
    assert before.code == 4, before.err
    assert (u["consumer"], "GROUP", f"{ns}-billing", "READ") in _findings(before, "missing")
    new_acls = world.acls("new")
    dry = cutover("rights", "apply", "--plan", world.plan_file, "--dry-run", "-o", "json")
    assert dry.code == 0, dry.err
    assert world.acls("new") == new_acls, "a dry run changed the new cluster's ACLs"
    # Killed once it has created the ACLs (before the quotas and the SCRAM user), then run again.
    killed = subprocess.Popen([sys.executable, "-m", "cutover", "rights", "apply", "--plan", world.plan_file,
                               "--execute"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert killed.stderr is not None
    first = ""
    while not first.startswith("created "):
        first = killed.stderr.readline()
        assert first or killed.poll() is None, "rights apply ended before it created anything"
    killed.kill()
    killed.wait(30)
    applied = cutover("rights", "apply", "--plan", world.plan_file, "--execute", "-o", "json")
    assert applied.code == 0, applied.err
    would = dry.json()["would"]["create"]
    assert len(would) > 10 and set(applied.json()["applied"]["created"]) < set(would)
    assert f"SCRAM user {world.users['quota']} (SCRAM-SHA-256, 8192 iterations)" in applied.json()["applied"]["created"]
    again = cutover("rights", "apply", "--plan", world.plan_file, "--execute", "-o", "json")
    assert again.code == 0 and again.json()["applied"] == {"created": [], "deleted": []}, again.out
    audit = cutover("rights", "audit", "--plan", world.plan_file, "-o", "json")
    assert audit.code == 0, audit.out + audit.err
    assert audit.json()["credentials"] == [] and audit.json()["counts"]["decisions"] > 100
    wrong = derive(world.plan.file, world.plan.file.with_name("wrong-key.yaml"), merge=True, rights={"credentials": {
        n["consumer"]: {**world.plan.spec.rights.credentials[n["consumer"]],  # type: ignore[union-attr]
                        "ssl.key.location": world.new_client("producer")["ssl.key.location"]}}})
    proved = cutover("rights", "audit", "--plan", str(wrong.file), "-o", "json")
    assert proved.code == 4 and [f["principal"] for f in proved.json()["credentials"]] == [n["consumer"]], proved.out

    old_ref, new_ref = ClusterRef.of(world.plan, "old"), ClusterRef.of(world.plan, "new")
    old_quotas, new_quotas = quotas.describe(old_ref, 60), quotas.describe(new_ref, 60)
    for entity in ((("user", world.users["quota"]),), (("client-id", f"{ns}-client"),)):
        assert new_quotas[entity] == old_quotas[entity], entity  # read back equal
    from cutover.kafka.clients import admin

    assert inventory.read_scram(new_ref, admin(new_ref), 30)[world.users["quota"]] == (("SCRAM-SHA-256", 8192),)

    # The same world with one group ACL left out on new: the audit names it, the promote refuses
    # before the freeze, and the consumer started by hand gets what the audit predicted.
    group_acl = _acl("GROUP", f"{ns}-billing", n["consumer"], "READ", pattern="PREFIXED")
    world.change_acls("new", delete=[group_acl])
    left_out = cutover("rights", "audit", "--plan", world.plan_file, "-o", "json")
    assert left_out.code == 4
    assert _findings(left_out, "missing") == {(u["consumer"], "GROUP", f"{ns}-billing", op)
                                              for op in ("READ", "DESCRIBE")}
    mirror = cutover_background(world)
    try:
        wait_for(lambda: _topics_on_new(world) >= {f"{ns}.orders", f"{ns}.secret", f"{ns}.payments"}, 120,
                 "the mirror to create the topics on the new cluster")
        wait_for(lambda: len(read_all(world.plan.cluster("new"), f"{ns}.orders", 3, timeout=30)) == 30, 120,
                 "the mirror to copy the orders")
        refused = cutover("promote", "--plan", world.plan_file, "--execute", "-o", "json", timeout=600)
        assert refused.code == 3, refused.out + refused.err
        assert "rights-match" in refused.out + refused.err and f"{ns}-billing" in refused.out + refused.err
        from cutover.switch import journal

        assert not journal.read(journal.directory(world.plan)).started_steps("promote")  # refused before any step
        error = _group_read(world.new_client("consumer"), f"{ns}.orders", f"{ns}-billing-app", 30)
        assert isinstance(error, KafkaError) and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error

        # An extra ALLOW on new is reported as extra.
        extra = _acl("TOPIC", f"{ns}.orders", n["consumer"], "WRITE")
        world.change_acls("new", create=[extra])
        found = cutover("rights", "audit", "--plan", world.plan_file, "-o", "json")
        assert (u["consumer"], "TOPIC", f"{ns}.orders", "WRITE") in _findings(found, "extra")
        # Deleted only where the plan says cutover owns the new cluster's rights; the dry run shows it.
        owned = derive(world.plan.file, world.plan.file.with_name("owned.yaml"), merge=True, rights={"owned": True})
        shown = cutover("rights", "apply", "--plan", str(owned.file), "--dry-run", "-o", "json")
        assert shown.json()["would"] == {"create": [group_acl.describe()], "delete": [extra.describe()]}
        assert extra in world.acls("new")
        additive = cutover("rights", "apply", "--plan", world.plan_file, "--dry-run", "-o", "json")
        assert additive.json()["would"]["delete"] == []
        gone = cutover("rights", "apply", "--plan", str(owned.file), "--execute", "-o", "json")
        assert gone.json()["applied"] == {"created": [group_acl.describe()], "deleted": [extra.describe()]}, gone.out
        assert extra not in world.acls("new") and group_acl in world.acls("new")

        # An ACL added on old while the mirror runs shows in the next audit; apply is safe to run again.
        late = _acl("TOPIC", f"{ns}.payments", u["quota"], "DESCRIBE_CONFIGS")
        world.change_acls("old", create=[late])
        later = cutover("rights", "audit", "--plan", world.plan_file, "-o", "json")
        assert (u["quota"], "TOPIC", f"{ns}.payments", "DESCRIBE_CONFIGS") in _findings(later, "missing")
        healed = cutover("rights", "apply", "--plan", world.plan_file, "--execute", "-o", "json")
        assert healed.code == 0, healed.err
        assert healed.json()["applied"]["created"] == [
            _acl("TOPIC", f"{ns}.payments", n["quota"], "DESCRIBE_CONFIGS").describe()]

        dry_promote = cutover("promote", "--plan", world.plan_file, "--dry-run", "-o", "json", timeout=300)
        checks = {c["name"]: c for c in dry_promote.json()["checks"]}
        assert checks["rights-match"]["passed"], checks["rights-match"]
        promoted = cutover("promote", "--plan", world.plan_file, "--execute", "-o", "json", timeout=600)
        assert promoted.code == 0, promoted.out + promoted.err
        back = cutover("rollback", "--plan", world.plan_file, "--dry-run", "-o", "json", timeout=300)
        reverse = {c["name"]: c for c in back.json()["checks"]}["rights-match"]
        assert reverse["passed"] and "on the old cluster what it may do on the new one" in reverse["expects"], reverse
        # The forward mirror, run as a service through all this, ends as designed: exit 8, said plainly.
        wait_for(lambda: mirror.poll() is not None, 120, "the running forward mirror to see the switch closed it")
        assert mirror.returncode == ExitCode.CLOSED_BY_SWITCH, _tail(world)
        assert "the switch closed this mirror: promote closed the forward mirror" in _tail(world)
        # Restarted by a supervisor: the same end at once; with --idle-when-closed it stays up, not ready.
        again = cutover("mirror", "--plan", world.plan_file, timeout=120)
        assert again.code == ExitCode.CLOSED_BY_SWITCH and "the switch closed this mirror" in again.err
        ready = world.plan.file.with_name("mirror.ready")
        idle = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", world.plan_file,
                                 "--idle-when-closed", "--ready-file", str(ready)], stderr=subprocess.PIPE, text=True)
        assert idle.stderr is not None
        line = idle.stderr.readline()
        while "idle until stopped" not in line:
            assert line, "the idle mirror ended without saying it idles"
            line = idle.stderr.readline()
        assert idle.poll() is None and not ready.exists()
        idle.terminate()
        assert idle.wait(60) == ExitCode.CLOSED_BY_SWITCH
    finally:
        if mirror.poll() is None:
            mirror.terminate()
            mirror.wait(120)

    # The real clients, each with its own credentials, on the new cluster.
    orders = sorted(r.value.decode() for r in read_all(world.plan.cluster("old"), f"{ns}.orders", 3))
    assert _group_read(world.new_client("consumer"), f"{ns}.orders", f"{ns}-billing-app", 30) == orders
    producer = Producer(world.new_client("producer", **{"transactional.id": f"{ns}-tx"}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(f"{ns}.orders", key=b"tx", value=f"tx-{i}".encode(), partition=i % 3)
    producer.commit_transaction(30)
    new_orders = [r.value.decode() for r in read_all(world.plan.cluster("new"), f"{ns}.orders", 3)]
    assert sorted(v for v in new_orders if v.startswith("tx-")) == [f"tx-{i}" for i in range(5)]
    denied = _group_read(world.new_client("denied"), f"{ns}.secret", f"{ns}-d", 1, timeout=30)
    assert isinstance(denied, KafkaError) and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied
    assert len(_group_read(world.new_client("denied"), f"{ns}.orders", f"{ns}-d", 35)) == 35


def cutover_background(world: World) -> Any:
    with world.plan.file.with_name("mirror.err").open("w") as err:
        return subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", world.plan_file],
                                stdout=subprocess.DEVNULL, stderr=err)


def _tail(world: World) -> str:
    return world.plan.file.with_name("mirror.err").read_text()[-3000:]


def _topics_on_new(world: World) -> set[str]:
    return set(AdminClient(dict(world.plan.cluster("new"))).list_topics(timeout=30).topics)


def test_cutovers_principal_without_describe_on_the_cluster_is_named_with_the_fix(world: World, tmp_path: Path) -> None:
    plan = derive(world.plan.file, tmp_path / "nobody.yaml", merge=True,
                  clusters={"old": {**world.plan.cluster("old"), "sasl.username": world.users["nobody"],
                                    "sasl.password": world.passwords["nobody"]}, "new": world.plan.cluster("new")})
    run = cutover("rights", "plan", "--plan", str(plan.file))
    assert run.code == 7, run.out + run.err
    assert f"refused cutover's principal ({world.users['nobody']}) reading its ACLs: it lacks DESCRIBE on the " \
        "CLUSTER resource" in run.err  # a ZooKeeper-mode cluster answers its DescribeAcls with no ACLs, no error
    assert "grant it DESCRIBE on the CLUSTER resource on the old cluster" in run.err
    assert "Traceback" not in run.err and world.passwords["nobody"] not in run.out + run.err
    check = cutover("plan", "check", "--plan", str(plan.file), "-o", "json")
    problems = [f["problem"] for f in check.json()["findings"] if f["check"] == "rights"]
    assert problems == ["cutover's principal on the old cluster lacks DESCRIBE on the CLUSTER resource, which "
                        "cutover rights needs to read its ACLs and SCRAM users",
                        "cutover's principal on the old cluster lacks DESCRIBE_CONFIGS on the CLUSTER resource, which "
                        "cutover rights needs to read its client quotas"], problems


def test_an_unset_scram_secret_is_named_and_nothing_is_half_created(world: World, tmp_path: Path) -> None:
    ns = world.ns
    extra_user = f"{ns}-late"
    client = AdminClient(dict(world.plan.cluster("old")))
    for f in client.alter_user_scram_credentials([UserScramCredentialUpsertion(
            extra_user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"late-password")]).values():
        f.result(timeout=30)
    world.change_acls("old", create=[_acl("TOPIC", f"{ns}.payments", f"User:{extra_user}", "READ")])
    plan = derive(world.plan.file, tmp_path / "unset.yaml", merge=True,
                  rights={"scram_passwords": {world.users["quota"]: QUOTA_VAR, extra_user: "RIGHTS_UNSET_PASSWORD"}})
    before = world.acls("new")
    run = cutover("rights", "apply", "--plan", str(plan.file), "--execute")
    assert run.code == 2, run.out + run.err
    assert f"RIGHTS_UNSET_PASSWORD (SCRAM user {extra_user}) are not set: nothing was changed" in run.err
    assert world.acls("new") == before  # its ACL was not created either


def test_a_cluster_without_an_authorizer_is_said_not_crashed_on(sandbox: Sandbox) -> None:
    run = cutover("rights", "plan", "--plan", str(sandbox.plan_file), "-o", "json")
    assert run.code == 0, run.err
    notes = run.json()["notes"]
    assert "the old cluster runs no authorizer: it enforces no ACL, every principal may do everything there" in notes
    assert run.json()["counts"] == {"create": 0, "extra": 0, "cannot": 0, "delete": 0}
