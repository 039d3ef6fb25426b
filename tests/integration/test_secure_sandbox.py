"""Both sandbox clusters with SASL/SCRAM and ACLs: the reader principal reads, never writes; credentials the
brokers refuse are named as such, at once, by every command."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive, load_plan
from tests.conftest import cutover, secret_values
from tests.integration.conftest import shaped_sandbox
from tests.integration.kafka_util import create_topic, produce, read_all


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    """Set CUTOVER_TEST_SECURE=DIR to reuse a sandbox of this shape that is up."""
    with shaped_sandbox(tmp_path_factory, "secure", "--security", "old=scram", "--security", "new=scram",
                        reuse_env="CUTOVER_TEST_SECURE", timeout=300) as box:
        yield box


def reader_plan(box: Sandbox, tmp: Path, password_var: str = "CUTOVER_SANDBOX_OLD_READER_PASSWORD") -> Path:
    data = yaml.safe_load(box.plan_file.read_text())
    data["clusters"]["old"].update({"sasl.username": "reader", "sasl.password": f"${{{password_var}}}"})
    data["env_file"] = str(box.secrets_file)
    out = tmp / "reader.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def test_plan_keeps_secrets_out_and_status_names_the_security(secure: Sandbox) -> None:
    text = secure.plan_file.read_text()
    assert "${CUTOVER_SANDBOX_OLD_ADMIN_PASSWORD}" in text
    passwords = [line.split("=", 1)[1] for line in secure.secrets_file.read_text().splitlines() if "=" in line]
    assert len(passwords) == 4 and not any(p in text for p in passwords)
    assert stat.S_IMODE(secure.secrets_file.stat().st_mode) == 0o600
    status = cutover("local", "status", "--dir", str(secure.dir), "-o", "json")
    assert status.json()["old"]["security"] == "SASL_PLAINTEXT/SCRAM-SHA-256"
    assert status.json()["new"]["security"] == "SASL_PLAINTEXT/SCRAM-SHA-256"
    assert not any(p in status.out for p in passwords)


def test_reader_reads_and_describes_but_cannot_write(secure: Sandbox, tmp_path: Path, ns: str) -> None:
    admin_plan = load_plan(secure.plan_file)
    topic = f"{ns}.secured"
    create_topic(admin_plan.cluster("old"), topic, partitions=2)
    produce(admin_plan.cluster("old"), topic, [{"key": b"k", "value": b"v", "partition": 1}])

    reader: Plan = load_plan(reader_plan(secure, tmp_path))
    assert reader.cluster("old")["sasl.username"] == "reader"
    assert [(r.partition, r.key, r.value) for r in read_all(reader.cluster("old"), topic, partitions=2)] == [
        (1, b"k", b"v")]

    # A read-only principal on old: not ready while the reverse mirror would write there at promote
    check = cutover("plan", "check", "--plan", str(reader_plan(secure, tmp_path)), "-o", "json")
    assert check.code == 3, (check.out, check.err)
    assert check.json()["old"]["topics"][topic] == 2
    assert [(f["check"], f["problem"].split(": the reverse mirror")[0]) for f in check.json()["findings"]] == [
        ("rights", "User:reader on the old cluster may not WRITE " + ", ".join(sorted(check.json()["old"]["topics"])))]
    assert "switch.reverse_mirror: false" in check.json()["findings"][0]["fix"]
    one_way = yaml.safe_load(reader_plan(secure, tmp_path).read_text())
    one_way["switch"] = {**one_way.get("switch", {}), "reverse_mirror": False}
    (tmp_path / "one-way.yaml").write_text(yaml.safe_dump(one_way))
    check = cutover("plan", "check", "--plan", str(tmp_path / "one-way.yaml"), "-o", "json")
    assert check.code == 0, (check.out, check.err)  # reading is all the mirror needs there
    admin_check = cutover("plan", "check", "--plan", str(secure.plan_file), "-o", "json")
    assert admin_check.code == 0 and admin_check.json()["findings"] == [], admin_check.out

    producer = Producer({**reader.cluster("old"), "message.timeout.ms": 10000})
    failures: list[KafkaError] = []
    producer.produce(topic, b"forbidden", on_delivery=lambda err, _m: failures.append(err))
    producer.flush(20)
    assert [e.code() for e in failures] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    with pytest.raises(KafkaException) as denied:
        create_topic(reader.cluster("old"), f"{ns}.not-allowed")
    assert denied.value.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                           KafkaError.CLUSTER_AUTHORIZATION_FAILED)


def test_wrong_password_is_named_and_never_printed(secure: Sandbox, tmp_path: Path) -> None:
    wrong = "not-the-password-42"
    run = cutover("plan", "check", "--plan", str(reader_plan(secure, tmp_path, "WRONG_PW")), "--timeout", "5",
                  env={"WRONG_PW": wrong}, timeout=60)
    assert run.code == 1
    assert "the old cluster" in run.out and "refused the credentials of user reader (SCRAM-SHA-256) while listing " \
        "topics: SASL authentication error" in run.out, run.out
    assert wrong not in run.out + run.err
    debug = cutover("--debug", "plan", "check", "--plan", str(reader_plan(secure, tmp_path, "WRONG_PW")),
                    "--timeout", "5", env={"WRONG_PW": wrong}, timeout=60)
    assert wrong not in debug.out + debug.err


def test_mirror_reads_the_old_cluster_with_read_and_describe_rights_only(secure: Sandbox, tmp_path: Path,
                                                                          ns: str) -> None:
    from tests.integration.mirror_util import mirror_a_topic_and_a_group, scoped_plan

    outputs = mirror_a_topic_and_a_group(load_plan(secure.plan_file), scoped_plan(reader_plan(secure, tmp_path), ns,
                                                                                 tmp_path), ns, f"{ns}.secured")
    passwords = [line.split("=", 1)[1] for line in secure.secrets_file.read_text().splitlines() if "=" in line]
    for out in outputs:
        assert not any(p in out for p in passwords)


@pytest.mark.parametrize(("change", "words"), [
    ({"sasl.mechanism": "SCRAM-SHA-512"},
     ["the broker at 127.0.0.1:{port} does not offer SASL mechanism SCRAM-SHA-512 (it offers: SCRAM-SHA-256)",
      "fix: set sasl.mechanism to SCRAM-SHA-256"]),
    ({"security.protocol": None, "sasl.mechanism": None, "sasl.username": None, "sasl.password": None},
     ["127.0.0.1:{port} closed the connection as soon as the client spoke: the listener expects another security "
      "protocol (SASL?) than the plan's PLAINTEXT", "fix: set security.protocol (and sasl.mechanism"]),
], ids=["mechanism-mismatch", "plaintext-client-sasl-listener"])
def test_a_sasl_mismatch_is_named_in_plan_check_and_in_the_mirror(
        secure: Sandbox, tmp_path: Path, change: dict[str, str | None], words: list[str]) -> None:
    data = yaml.safe_load(secure.plan_file.read_text())
    old = data["clusters"]["old"]
    port = old["bootstrap.servers"].rsplit(":", 1)[1]
    for key, value in change.items():
        old.pop(key) if value is None else old.__setitem__(key, value)
    data["env_file"] = str(secure.secrets_file)
    bad = tmp_path / "plan.yaml"
    bad.write_text(yaml.safe_dump(data))
    check = cutover("plan", "check", "--plan", str(bad), "--timeout", "5", timeout=90)
    # every command explains it the same way
    mirror = cutover("mirror", "--plan", str(bad), "--timeout", "5", timeout=120)
    assert (check.code, mirror.code) == (1, 1), (check.out, mirror.err)
    for word in words:
        assert word.format(port=port) in check.out, check.out
        assert word.format(port=port) in mirror.err, mirror.err
    passwords = [line.split("=", 1)[1] for line in secure.secrets_file.read_text().splitlines() if "=" in line]
    assert not any(p in check.out + check.err + mirror.out + mirror.err for p in passwords)
    assert "Traceback" not in check.err + mirror.err


def test_assess_reads_the_security_and_a_refused_call_is_unknown(secure: Sandbox, tmp_path: Path, ns: str) -> None:
    """`cutover assess` on SASL/SCRAM with ACLs: the old cluster enforces them. With a principal that may do
    nothing, what the cluster refuses is unknown with its refusal, never a crash."""
    topic = f"{ns}.assessed"
    create_topic(load_plan(secure.plan_file).cluster("old"), topic, 1)
    admin_plan = tmp_path / "admin.yaml"
    data = yaml.safe_load(secure.plan_file.read_text())
    data.update({"env_file": str(secure.secrets_file), "topics": {"include": [f"{ns}\\..*"]}, "tables": []})
    admin_plan.write_text(yaml.safe_dump(data))
    run = cutover("assess", "--plan", str(admin_plan), "--sample", "0", "--probe", "0", "-o", "json")
    assert run.code in (0, 3) and "Traceback" not in run.err, run.err
    security = next(r for r in run.json()["rows"] if r["key"] == "security")
    assert security["evidence"]["old"] == {"protocol": "SASL_PLAINTEXT", "sasl": "SCRAM-SHA-256",
                                           "acls_enforced": True}
    assert security["evidence"]["new"]["acls_enforced"] is True
    assert not any(f["reason"].startswith("the old cluster enforces no ACLs") for f in security["findings"])
    assert security["evidence"]["secrets_inline"] == []  # the sandbox's plan takes them from its env file

    # A principal with no rights at all: the calls assess needs are refused; those readings are unknown, named
    admin = AdminClient(load_plan(secure.plan_file).cluster("old"))
    nobody = f"nobody-{ns[-6:]}"
    done = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        nobody, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"nobody-password-1")])
    for future in done.values():
        future.result(timeout=30)
    data["clusters"]["old"].update({"sasl.username": nobody, "sasl.password": "${NOBODY_PASSWORD}"})
    (tmp_path / "nobody.yaml").write_text(yaml.safe_dump(data))
    run = cutover("assess", "--plan", str(tmp_path / "nobody.yaml"), "--sample", "0", "--probe", "0", "-o", "json",
                  env={"NOBODY_PASSWORD": "nobody-password-1"})
    assert run.code in (0, 3) and "Traceback" not in run.err, run.err
    security = next(r for r in run.json()["rows"] if r["key"] == "security")
    unknown = [f["reason"] for f in security["findings"] if f["verdict"] == "unknown"]
    assert any(u.startswith("whether the old cluster enforces ACLs: ") for u in unknown), security["findings"]
    assert "nobody-password-1" not in run.out + run.err


#: A line of librdkafka's own log, as a client made without cutover's logger prints it on stderr.
RAW_CLIENT_LOG = re.compile(r"^%\d+\|\d+\.\d+\|[A-Z_]+\|", re.MULTILINE)


def test_rights_audit_names_each_refused_principal_side_by_side(secure: Sandbox, tmp_path: Path, ns: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`rights audit` before `rights apply`: three principals whose SCRAM users are not on the new cluster yet.
    The broker refuses each in about 300 ms: each is named as refused, the three checked side by side (the run
    ends well within one --timeout of 60 s, where one after another waiting it out took 3 x 60 s), and no line
    of the client library's own log reaches stderr."""
    users = [f"app{i}-{ns[-6:]}" for i in range(3)]
    monkeypatch.setenv("APP_PASSWORD", "app-pw-never-shown")
    plan = derive(secure.plan_file, tmp_path / "audit.yaml", merge=True, topics={"include": [f"{ns}\\..*"]},
                  groups={"include": [f"{ns}\\..*"]},
                  rights={"credentials": {f"User:{u}": {"sasl.username": u, "sasl.password": "${APP_PASSWORD}"}
                                          for u in users}})
    new = plan.cluster("new")["bootstrap.servers"]
    # Given less than one --timeout: waiting out any principal's (the admin principal's answers must not make
    # the others' refusals look like a broker restarting) ends the subprocess, and the test, there.
    run = cutover("rights", "audit", "--plan", str(plan.file), "--timeout", "60", "-o", "json", timeout=45)
    assert run.code == 4, (run.out, run.err)
    found = {f["principal"]: f["target"] for f in run.json()["credentials"]}
    assert sorted(found) == sorted(f"User:{u}" for u in users), found
    for user in users:
        assert found[f"User:{user}"].startswith(
            f"the new cluster ({new}) refused the credentials of user {user} (SCRAM-SHA-256)"), found
    assert not RAW_CLIENT_LOG.search(run.err) and "SASL authentication error" not in run.err, run.err
    text = cutover("rights", "audit", "--plan", str(plan.file), "--timeout", "60", timeout=45)
    assert text.code == 4, (text.out, text.err)
    assert f"CREDENTIALS: User:{users[0]}: the new cluster ({new}) refused the credentials of user {users[0]}" \
        in text.out, text.out
    assert "(fix: create the user on the new cluster (cutover rights apply --execute creates those of " \
        "rights.scram_passwords)" in text.out, text.out
    assert not RAW_CLIENT_LOG.search(text.err)
    assert not any(p in run.out + run.err + text.out + text.err for p in ["app-pw-never-shown",
                                                                         *secret_values(secure.dir)])
    back = cutover("rights", "audit", "--plan", str(plan.file), "--reverse", "-o", "json", timeout=100)
    assert back.code == 0 and back.json()["credentials"] == [], back.out
    assert any(n.startswith("rights.credentials are proved on the new cluster only") for n in back.json()["notes"])


def test_rights_audit_names_credentials_that_do_not_suit_the_listener(secure: Sandbox, tmp_path: Path,
                                                                      ns: str) -> None:
    """A principal given a client certificate where the new cluster authenticates with SCRAM, and one given a
    mechanism its listener does not offer: each a finding that says so, with its own fix."""
    plan = derive(secure.plan_file, tmp_path / "audit.yaml", merge=True, topics={"include": [f"{ns}\\..*"]},
                  groups={"include": [f"{ns}\\..*"]}, rights={"credentials": {
                      "User:certified": {"ssl.certificate.location": str(tmp_path / "app.pem"),
                                         "ssl.key.location": str(tmp_path / "app.key")},
                      "User:reader": {"sasl.username": "reader", "sasl.password": "any", "sasl.mechanism":
                                      "SCRAM-SHA-512"}}})
    run = cutover("rights", "audit", "--plan", str(plan.file), "-o", "json", timeout=100)
    assert run.code == 4, (run.out, run.err)
    found = {f["principal"]: f for f in run.json()["credentials"]}
    assert found["User:certified"]["target"] == "its client properties in rights.credentials do not suit the new " \
        "cluster's listener (SASL_PLAINTEXT): sasl.username and sasl.password must be set", found
    assert found["User:certified"]["fix"].startswith("give sasl.username and sasl.password for User:certified")
    assert "does not offer SASL mechanism SCRAM-SHA-512 (it offers: SCRAM-SHA-256)" in found["User:reader"]["target"]
    assert found["User:reader"]["fix"].startswith("set sasl.mechanism to SCRAM-SHA-256")


@pytest.mark.parametrize(("side", "args", "code"), [
    ("new", ["plan", "check"], 1),
    ("new", ["status"], 1),
    ("new", ["mirror", "status"], 1),
    ("new", ["mirror", "--until-caught-up"], 1),
    ("new", ["rights", "plan"], 1),
    ("new", ["rights", "audit"], 1),
    ("new", ["rights", "apply", "--dry-run"], 1),
    ("new", ["promote", "--dry-run"], 3),
    ("new", ["assess", "--sample", "0", "--probe", "0"], 0),  # an unknown row, named; no blocker
    ("old", ["offsets", "translate", "--group", "any-group"], 1),
    ("old", ["readers", "find"], 1),
], ids=lambda v: "-".join(v) if isinstance(v, list) else str(v))
def test_a_wrong_admin_password_is_named_at_once_by_every_command(
        secure: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, side: str, args: list[str],
        code: int) -> None:
    """The broker refuses a wrong password in about 300 ms and librdkafka's error callback says so: every
    command names the refused credentials then, not after --timeout (600 s here; each run is given 60 s)."""
    monkeypatch.setenv("WRONG_PASSWORD", "wrong-pw-9")
    data = yaml.safe_load(secure.plan_file.read_text())
    cluster = {**data["clusters"][side], "sasl.password": "${WRONG_PASSWORD}"}
    plan = derive(secure.plan_file, tmp_path / "wrong.yaml", merge=True, clusters={side: cluster})
    run = cutover(*args, "--plan", str(plan.file), "--timeout", "600", timeout=60)
    assert run.code == code, (run.out, run.err)
    said = f"the {side} cluster ({cluster['bootstrap.servers']}) refused the credentials of user admin " \
           "(SCRAM-SHA-256)"
    assert said in run.out + run.err, (run.out, run.err)
    assert not RAW_CLIENT_LOG.search(run.err) and "Traceback" not in run.err, run.err
    assert "wrong-pw-9" not in run.out + run.err
