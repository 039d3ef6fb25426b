"""The local sandbox and `cutover plan check`, against the real brokers and catalog."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import commit


def test_status_json_has_the_documented_shape(sandbox: Sandbox) -> None:
    run = cutover("local", "status", "--dir", str(sandbox.dir), "--output", "json")
    assert run.code == 0, run.err
    status = run.json()
    for side in ("old", "new"):
        assert status[side]["bootstrap"].startswith("127.0.0.1:")
        assert status[side]["running"] is True
    assert status["old"]["bootstrap"] != status["new"]["bootstrap"]
    assert status["catalog"]["name"] == "cutover"
    assert status["catalog"]["uri"] == f"sqlite:///{sandbox.dir / 'catalog.db'}"
    assert Path(status["plan"]).is_file()
    plan = yaml.safe_load(Path(status["plan"]).read_text())
    assert plan["clusters"]["old"]["bootstrap.servers"] == status["old"]["bootstrap"]
    assert (sandbox.dir / "old" / "broker.log").stat().st_size > 0


@pytest.mark.parametrize(("port", "props", "words"), [
    ("banner_port", {}, ["127.0.0.1:{port} is not a Kafka listener: it answered Kafka's first request with bytes "
                         "that are not Kafka ('SSH-'...)", "fix: check the port in bootstrap.servers"]),
    ("closed_port", {}, ["nothing listens on 127.0.0.1:{port} (connection refused)",
                         "fix: check bootstrap.servers (host and port) and that the brokers are up"]),
    (None, {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "app",
            "sasl.password": "pw-never-shown"},
     ["is not a SASL listener: the broker refused the SASL handshake",
      "fix: set security.protocol to PLAINTEXT and drop the sasl.* settings"]),
], ids=["ssh-like-server", "nothing-listens", "sasl-client-plaintext-listener"])
def test_a_wrong_address_or_protocol_is_named_with_what_to_check(
        sandbox: Sandbox, tmp_path: Path, request: pytest.FixtureRequest, port: str | None,
        props: dict[str, str], words: list[str]) -> None:
    old = dict(yaml.safe_load(sandbox.plan_file.read_text())["clusters"]["old"])
    number = request.getfixturevalue(port) if port else int(old["bootstrap.servers"].rsplit(":", 1)[1])
    old.update({"bootstrap.servers": f"127.0.0.1:{number}", **props})
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, clusters={"old": old})
    # librdkafka gives up a connection setup after 5 s: a --timeout past it lets that be seen
    run = cutover("plan", "check", "--plan", str(bad.file), "--timeout", "7", timeout=90)
    assert run.code == 1, (run.out, run.err)
    assert f"old cluster 127.0.0.1:{number}: FAILED: could not reach the old cluster" in run.out
    for word in words:
        assert word.format(port=number) in run.out, run.out
    assert "pw-never-shown" not in run.out + run.err and "Traceback" not in run.err


def test_plan_check_prints_its_report_when_its_timeout_runs_out_naming_what_was_not_asked(
        sandbox: Sandbox, tmp_path: Path, silent_port: int) -> None:
    """The old cluster hangs for the whole --timeout: the new cluster answered its view, and what would be asked
    of it after (its capabilities, its rights) is named as not checked, in the report (was: no report at all,
    only 'did not finish within its --timeout' once the checks went past it on a loaded machine)."""
    old = dict(yaml.safe_load(sandbox.plan_file.read_text())["clusters"]["old"])
    old["bootstrap.servers"] = f"127.0.0.1:{silent_port}"
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, clusters={"old": old})
    started = time.monotonic()  # 10 s: long enough for the healthy new cluster to answer on a loaded machine
    run = cutover("plan", "check", "--plan", str(bad.file), "--timeout", "10", "-o", "json", timeout=90)
    took = time.monotonic() - started
    assert run.code == 1, (run.out, run.err)
    report = run.json()
    assert report["old"]["reachable"] is False and report["new"]["reachable"] is True
    assert report["unchecked"] == ["the new cluster's capabilities", "the new cluster's rights on its topics"]
    assert report["ok"] is False and "capabilities" not in report["new"]
    assert took < 10 + 15, took  # the report, not the backstop's 'did not finish' (which prints no report)
    text = cutover("plan", "check", "--plan", str(bad.file), "--timeout", "10", timeout=90)
    assert text.code == 1, (text.out, text.err)
    assert ("NOT CHECKED (the --timeout ran out before they were asked): the new cluster's capabilities, the new "
            "cluster's rights on its topics") in text.out, text.out
    assert "fix: give a longer --timeout" in text.out and text.out.rstrip().endswith("NOT OK: see above")


@pytest.mark.parametrize(("props", "words"), [
    ({"security.protocol": "SSL"}, ["does not speak TLS", "fix: set security.protocol to PLAINTEXT"]),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "app",
      "sasl.password": "pw-never-shown"}, ["is not a SASL listener"]),
], ids=["tls-client-plaintext-listener", "sasl-client-plaintext-listener"])
def test_a_wrong_security_protocol_is_named_at_once_not_after_the_timeout(
        sandbox: Sandbox, tmp_path: Path, props: dict[str, str], words: list[str]) -> None:
    """librdkafka knows these within milliseconds: the command must not wait out its --timeout (600 s
    here: the run is given 60 s in all)."""
    old = dict(yaml.safe_load(sandbox.plan_file.read_text())["clusters"]["old"])
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, clusters={"old": {**old, **props}})
    run = cutover("plan", "check", "--plan", str(bad.file), "--timeout", "600", timeout=60)
    assert run.code == 1, (run.out, run.err)
    for word in words:
        assert word in run.out, run.out
    mirror = cutover("mirror", "--plan", str(bad.file), "--until-caught-up", "--timeout", "600", timeout=60)
    assert mirror.code == 1 and words[0] in mirror.err, mirror.err
    assert "pw-never-shown" not in run.out + run.err + mirror.err


@pytest.mark.parametrize("case", ["controller", "http-server"])
def test_a_controller_or_http_port_as_bootstrap_is_named_at_once_not_after_the_timeout(
        sandbox: Sandbox, tmp_path: Path, http_port: int, case: str) -> None:
    """A KRaft controller's listener (it answers ApiVersions with the controller's APIs only, and Metadata with
    UNSUPPORTED_FEATURE) and an HTTP server that waits for a line (Python's http.server: silent to Kafka's first
    request) are known within a second or two: named then, not after --timeout (600 s; the runs get 60 s)."""
    port = sandbox.status()["old"]["brokers"][0]["controller_port"] if case == "controller" else http_port
    old = dict(yaml.safe_load(sandbox.plan_file.read_text())["clusters"]["old"])
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True,
                 clusters={"old": {**old, "bootstrap.servers": f"127.0.0.1:{port}"}})
    words = {"controller": [f"127.0.0.1:{port} is a KRaft controller listener, not a broker's",
                            "fix: point bootstrap.servers at the brokers' listener"],
             "http-server": [f"127.0.0.1:{port} is an HTTP server, not a Kafka listener: it answered HTTP",
                             "fix: check the port in bootstrap.servers"]}[case]
    check = cutover("plan", "check", "--plan", str(bad.file), "--timeout", "600", timeout=60)
    assert check.code == 1 and f"old cluster 127.0.0.1:{port}: FAILED: could not reach the old cluster" in check.out, (
        check.out, check.err)
    status = cutover("mirror", "status", "--plan", str(bad.file), "--timeout", "600", timeout=60)
    assert status.code == 1, (status.out, status.err)
    for word in words:
        assert word in check.out, check.out
        assert word in status.err, status.err
    assert "Traceback" not in check.err + status.err


def test_the_listener_probe_names_only_what_is_not_a_broker(sandbox: Sandbox, http_port: int, closed_port: int,
                                                            silent_port: int) -> None:
    """`listener.identify` on real listeners: a broker's and nothing at all say nothing (no false alarm), a
    hung host costs at most its two waits, a controller's and an HTTP server's are named."""
    from cutover.kafka import listener

    status = sandbox.status()["old"]
    controller = status["brokers"][0]["controller_port"]

    def ask(port: int) -> str | None:
        return listener.identify({"bootstrap.servers": f"127.0.0.1:{port}"}, timeout=0.5)

    assert ask(int(status["bootstrap"].rsplit(":", 1)[1])) is None
    assert ask(closed_port) is None and ask(silent_port) is None
    assert ask(controller) == f"PROBE controller 127.0.0.1:{controller}"
    assert (ask(http_port) or "").startswith(f"PROBE http 127.0.0.1:{http_port}: HTTP/1.0 200")
    assert listener.identify({"bootstrap.servers": f"127.0.0.1:{controller}", "security.protocol": "SSL"}, 0.5) is None


def test_a_port_nothing_listens_on_is_named_within_seconds_not_after_the_timeout(
        sandbox: Sandbox, tmp_path: Path, closed_port: int) -> None:
    """Every connection refused, by a cluster this process never reached: named after a 3 s grace, not
    after --timeout (600 s here; the run is given 60 s). A cluster it has reached is waited for (a broker
    restarting refuses for a while): the mirror riding through restarts is tested in test_mirror_faults."""
    old = dict(yaml.safe_load(sandbox.plan_file.read_text())["clusters"]["old"])
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True,
                 clusters={"old": {**old, "bootstrap.servers": f"127.0.0.1:{closed_port}"}})
    said = f"nothing listens on 127.0.0.1:{closed_port} (connection refused)"
    run = cutover("plan", "check", "--plan", str(bad.file), "--timeout", "600", timeout=60)
    assert run.code == 1 and said in run.out, (run.out, run.err)
    mirror = cutover("mirror", "--plan", str(bad.file), "--until-caught-up", "--timeout", "600", timeout=60)
    assert mirror.code == 1 and said in mirror.err, mirror.err


def test_status_exits_1_and_names_the_part_in_error(sandbox: Sandbox, tmp_path: Path, closed_port: int) -> None:
    old = dict(yaml.safe_load(sandbox.plan_file.read_text())["clusters"]["old"])
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True,
                 clusters={"old": {**old, "bootstrap.servers": f"127.0.0.1:{closed_port}"}})
    # 10 s: the refused port is named at once; a loaded machine's start takes seconds of a shorter --timeout
    run = cutover("status", "--plan", str(bad.file), "--timeout", "10", timeout=90)
    assert run.code == 1, (run.out, run.err)
    assert f"mirror forward (old -> new): could not reach the old cluster (127.0.0.1:{closed_port})" in run.out
    assert "NOT OK: 1 part(s) in error (above); exit code 1" in run.out
    report = cutover("status", "--plan", str(bad.file), "--timeout", "10", "-o", "json", timeout=90)
    assert report.code == 1 and len(report.json()["problems"]) == 1
    assert report.json()["problems"][0].startswith("mirror forward: could not reach the old cluster")


def test_status_prints_its_report_when_a_part_does_not_answer_within_its_timeout(
        sandbox: Sandbox, tmp_path: Path, silent_port: int, ns: str) -> None:
    """The catalog hangs (a REST server that accepts and never answers): status names the verify part as late
    and prints the rest, within its --timeout and the seconds it has to say why (was: no report at all, the
    command's backstop ending it while it waited on the catalog)."""
    catalog = {"name": "cutover", "type": "rest", "uri": f"http://127.0.0.1:{silent_port}",
               "warehouse": (sandbox.dir / "warehouse").as_uri()}
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, catalog=catalog,
                 topics={"include": [f"{ns}\\..*"]},
                 tables=[{"topic": f"{ns}.orders", "old": f"{ns}.legacy", "new": f"{ns}.shadow"}])
    create_topic(bad.cluster("old"), f"{ns}.orders", partitions=1)
    started = time.monotonic()
    # 10 s: long enough for the healthy clusters' part to answer on a loaded machine
    run = cutover("status", "--plan", str(bad.file), "--timeout", "10", "-o", "json", timeout=90)
    took = time.monotonic() - started
    assert run.code == 1, (run.out, run.err)
    report = run.json()
    assert report["verify"] == {"error": "did not answer within the --timeout of 10s"}, report["verify"]
    assert report["problems"] == ["verify: did not answer within the --timeout of 10s"], report["problems"]
    assert "error" not in report["mirror"]["forward"], report["mirror"]  # the clusters answered: shown
    assert report["routing"]["active"] == "old"
    assert "did not finish within its --timeout" not in run.err and took < 10 + 15, (run.err, took)
    text = cutover("status", "--plan", str(bad.file), "--timeout", "10", timeout=90)
    assert text.code == 1 and "verify: did not answer within the --timeout of 10s" in text.out, text.out


def test_init_writes_a_plan_that_plan_check_accepts_for_the_sandbox(sandbox: Sandbox, plan: Plan, ns: str,
                                                                    tmp_path: Path) -> None:
    if sandbox.status()["catalog"]["kind"] != "sqlite":
        pytest.skip("a REST or PostgreSQL catalog also needs its S3 properties, which init does not ask for")
    create_topic(plan.cluster("old"), f"{ns}.orders", partitions=2)
    commit(plan.cluster("old"), f"{ns}.billing", {(f"{ns}.orders", 0): 0})
    status = sandbox.status()
    cat = plan.spec.catalog
    assert cat is not None
    _old_table(plan, f"{ns}.legacy")  # the existing pipeline's (plan check names an absent one)
    init = cutover("init", "--plan", str(tmp_path / "plan.yaml"), "--name", f"{ns}-init",
                   "--old-bootstrap", status["old"]["bootstrap"], "--new-bootstrap", status["new"]["bootstrap"],
                   "--topics", f"{ns}\\.orders", "--groups", f"{ns}\\.billing",
                   "--table", f"{ns}.orders={ns}.legacy:{ns}.shadow", "--catalog-name", cat.name,
                   "--catalog-uri", cat.uri, "--warehouse", cat.warehouse or "", "--timeout", "30")
    assert init.code == 0, (init.out, init.err)
    assert "OK: every cluster, the catalog and the storage answered" in init.out
    check = cutover("plan", "check", "--plan", str(tmp_path / "plan.yaml"), "-o", "json")
    assert check.code == 0, check.out
    report = check.json()
    assert list(report["old"]["topics"]) == [f"{ns}.orders"] and report["old"]["groups"] == [f"{ns}.billing"]


def _old_table(plan: Plan, name: str) -> None:
    """An existing pipeline's table, empty, in the sandbox's catalog."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from cutover.lake import catalog as catalog_mod

    cat = catalog_mod.load(plan.require_catalog("the test's old table"))
    cat.create_namespace_if_not_exists(name.rsplit(".", 1)[0])
    cat.create_table(name, Schema(NestedField(1, "seq", LongType(), required=False)))


def test_a_sqlite_catalog_has_no_server_to_stop(sandbox: Sandbox) -> None:
    if sandbox.status()["catalog"]["kind"] != "sqlite":
        pytest.skip("this sandbox's catalog has servers (test_lake.py covers them)")
    for part in ("catalog", "storage"):
        run = cutover("local", "stop", part, "--dir", str(sandbox.dir))
        assert run.code == 2, run.err
        assert f"no {part} server to stop or start" in run.err and "--catalog rest" in run.err
        assert "Traceback" not in run.err


def test_up_twice_changes_nothing(sandbox: Sandbox) -> None:
    before = sandbox.status()
    run = cutover("local", "up", "--dir", str(sandbox.dir), "-o", "json")
    assert run.code == 0, run.err
    after = run.json()
    assert [after[s]["pid"] for s in ("old", "new")] == [before[s]["pid"] for s in ("old", "new")]
    assert "starting" not in run.err


def test_the_sandbox_plan_leaves_out_internal_topics_and_the_connect_workers(sandbox: Sandbox) -> None:
    from cutover.plan import load_plan

    topics = load_plan(sandbox.plan_file).spec.topics
    assert [t for t in ("connect-configs", "connect-offsets", "connect-status", "__consumer_offsets", "_schemas",
                        "connect-configsx", "orders") if topics.matches(t)] == ["connect-configsx", "orders"]


def test_plan_check_reports_topics_groups_and_tables(sandbox: Sandbox, plan: Plan, ns: str) -> None:
    create_topic(plan.cluster("old"), f"{ns}.orders", partitions=3)
    create_topic(plan.cluster("new"), f"{ns}.orders", partitions=2)
    group = f"{ns}-billing"
    commit(plan.cluster("new"), group, {(f"{ns}.orders", 0): 0})

    run = cutover("plan", "check", "--plan", str(sandbox.plan_file), "-o", "json")
    assert run.code == 0, run.err
    report = run.json()
    status = sandbox.status()
    assert report["ok"] is True and report["findings"] == []
    for side, partitions in (("old", 3), ("new", 2)):
        assert report[side]["reachable"] is True
        assert report[side]["cluster_id"] == status[side]["cluster_id"]
        assert report[side]["topics"][f"{ns}.orders"] == partitions
    assert group in report["new"]["groups"]
    assert group not in report["old"]["groups"]
    assert report["catalog"]["reachable"] is True

    text = cutover("plan", "check", "--plan", str(sandbox.plan_file))
    assert text.code == 0
    assert f"old cluster {status['old']['bootstrap']}: id {status['old']['cluster_id']}" in text.out
    assert f"new cluster {status['new']['bootstrap']}: id {status['new']['cluster_id']}" in text.out
    assert f"{ns}.orders" in text.out and "3 partition(s)" in text.out


@pytest.mark.parametrize(("change", "words"), [
    ({"topics": {"include": ["{ns}.order"]}},
     ["topics.include[0] '{ns}.order' matches no topic on the old cluster",
      "fix: patterns are regular expressions that must match the whole name (it matches part of {ns}.orders"]),
    ({"topics": {"include": ["{ns}\\..*"], "exclude": ["{ns}\\.orders"]}},
     ["the plan selects no topic on the old cluster", "fix: fix topics.include / topics.exclude"]),
    ({"groups": {"include": ["{ns}-nobody"]}},
     ["groups.include[0] '{ns}-nobody' matches no consumer group on the old cluster"]),
    ({"hooks": {"freeze_producers": "./freeze.sh"}},
     ["hooks.freeze_producers: {tmp}/freeze.sh does not exist", "fix: create the script"]),
    ({"hooks": {"resume": "./plain.sh"}}, ["hooks.resume: {tmp}/plain.sh is not executable", "fix: chmod +x"]),
    ({"hooks": {"resume": "no-such-command-xyz --now"}}, ["the command 'no-such-command-xyz' is not on PATH"]),
    ({"catalog": {"uri": "sqlite:///{tmp}/no-such-catalog.db"}},
     ["catalog.uri sqlite:///{tmp}/no-such-catalog.db: the SQLite file {tmp}/no-such-catalog.db does not exist "
      "(plan check does not create it)", "catalog cutover: not opened"]),
    ({"topics": {"include": ["{ns}\\.orders"]}, "tables": [{"topic": "{ns}.ordrs", "old": "{ns}.legacy",
                                                               "new": "{ns}.orders"}]},
     ["tables[0].topic {ns}.ordrs does not exist on the old cluster", "the shadow would find no record of it",
      "fix: correct the table pair's topic (did you mean {ns}.orders?), or create the topic on the old cluster"]),
    ({"tables": [{"topic": "{ns}.orders", "old": "{ns}.legacy_gone", "new": "{ns}.orders"}]},
     ["tables[0].old {ns}.legacy_gone does not exist in the catalog: verify compares the new table with it",
      "fix: name the existing pipeline's table as the catalog lists it"]),
], ids=["pattern-matches-nothing", "all-excluded", "group-matches-nothing", "hook-missing", "hook-not-executable",
        "hook-not-on-path", "sqlite-file-missing", "table-topic-missing-and-unselected", "old-table-absent"])
def test_plan_check_is_not_ready_when_a_later_command_would_refuse(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path, change: dict[str, Any], words: list[str]) -> None:
    create_topic(plan.cluster("old"), f"{ns}.orders", partitions=1)
    _old_table(plan, f"{ns}.legacy")
    (tmp_path / "plain.sh").write_text("#!/bin/sh\n")
    fill = {"ns": ns, "tmp": str(tmp_path)}
    section = json.loads(json.dumps(change).replace("{ns}", ns).replace("{tmp}", str(tmp_path)))
    bad = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, **section)
    run = cutover("plan", "check", "--plan", str(bad.file))
    assert run.code == 3, (run.code, run.out, run.err)
    assert "NOT READY: see the findings above" in run.out and "Traceback" not in run.err
    for word in words:
        assert word.format(**fill) in run.out, run.out
    report = cutover("plan", "check", "--plan", str(bad.file), "-o", "json").json()
    assert report["ok"] is False and report["reachable"] is True and len(report["findings"]) == 1
    assert not (tmp_path / "no-such-catalog.db").exists()
    if "hooks" in change:  # the offline check finds the hooks too
        offline = cutover("plan", "check", "--plan", str(bad.file), "--offline", "-o", "json")
        assert offline.code == 3 and offline.json()["findings"] == report["findings"]
        assert sorted(offline.json()) == sorted(report)  # the same keys: what was not asked is null
        assert (offline.json()["offline"], report["offline"], offline.json()["old"]) == (True, False, None)


def test_plan_check_names_an_unreachable_cluster_without_hanging(sandbox: Sandbox, tmp_path: Path) -> None:
    data = yaml.safe_load(sandbox.plan_file.read_text())
    data["clusters"]["old"] = {"bootstrap.servers": "127.0.0.1:1"}
    data.pop("env_file")
    bad = tmp_path / "plan.yaml"
    bad.write_text(yaml.safe_dump(data))
    # Each wait gets 10 s: 3 s failed the new cluster's line under CI's load. The old one's fails within it.
    started = time.monotonic()
    run = cutover("plan", "check", "--plan", str(bad), "--timeout", "10", timeout=60)
    assert time.monotonic() - started < 45, run.out
    assert run.code == 1
    assert "old cluster 127.0.0.1:1: FAILED: could not reach the old cluster (127.0.0.1:1)" in run.out
    assert "NOT OK" in run.out
    assert "new cluster" in run.out and "FAILED" not in run.out.split("new cluster")[1].splitlines()[0]


def test_stop_and_start_one_cluster_keeps_its_data(sandbox: Sandbox, plan: Plan, ns: str) -> None:
    topic = f"{ns}.kept"
    create_topic(plan.cluster("old"), topic, partitions=2)
    now = int(time.time() * 1000)  # older than the 7-day retention, the broker's next check deletes them
    records: list[dict[str, Any]] = [
        {"key": f"k{i}".encode(), "value": f"v{i}".encode() * 10, "partition": i % 2,
         "headers": [("h", f"{i}".encode())], "timestamp": now + i}
        for i in range(20)
    ]
    produce(plan.cluster("old"), topic, records)
    before = read_all(plan.cluster("old"), topic, partitions=2)
    assert len(before) == 20

    try:
        stopped = cutover("local", "stop", "old", "--dir", str(sandbox.dir), "-o", "json")
        assert stopped.code == 0 and stopped.json() == {"cluster": "old", "was_running": True, "killed": False}
        status = cutover("local", "status", "--dir", str(sandbox.dir), "-o", "json").json()
        assert status["old"]["running"] is False and status["new"]["running"] is True
        assert cutover("plan", "check", "--plan", str(sandbox.plan_file), "--timeout", "2").code == 1
    finally:
        started = cutover("local", "start", "old", "--dir", str(sandbox.dir), "-o", "json")
    assert started.code == 0, started.err
    assert started.json()["bootstrap"] == status["old"]["bootstrap"]

    after = read_all(plan.cluster("old"), topic, partitions=2)
    assert after == before
    assert next((r.key, r.value, r.headers, r.timestamp) for r in after if r.partition == 1) == (
        b"k1", b"v1" * 10, (("h", b"1"),), now + 1)


def test_kill_is_a_crash_and_start_recovers(sandbox: Sandbox, plan: Plan, ns: str) -> None:
    topic = f"{ns}.crash"
    create_topic(plan.cluster("new"), topic)
    produce(plan.cluster("new"), topic, [{"key": b"a", "value": b"1"}, {"key": None, "value": None}])
    try:
        killed = cutover("local", "stop", "new", "--kill", "--dir", str(sandbox.dir), "-o", "json")
        assert killed.json()["killed"] is True
    finally:
        assert cutover("local", "start", "new", "--dir", str(sandbox.dir)).code == 0
    assert [(r.key, r.value) for r in read_all(plan.cluster("new"), topic)] == [(b"a", b"1"), (None, None)]


def test_old_and_new_as_two_names_of_one_cluster_are_refused(sandbox: Sandbox, tmp_path: Path) -> None:
    """The same cluster under two names (127.0.0.1 and localhost): the plan's own check cannot see
    it, the clusters' ids do. plan check says so, and the mirror refuses before it writes anything."""
    old = dict(yaml.safe_load(sandbox.plan_file.read_text())["clusters"]["old"])
    port = old["bootstrap.servers"].rsplit(":", 1)[1]
    same = derive(sandbox.plan_file, tmp_path / "same.yaml", merge=True, name="same",
                  clusters={"old": old, "new": {**old, "bootstrap.servers": f"localhost:{port}"}})
    check = cutover("plan", "check", "--plan", str(same.file), "-o", "json")
    assert check.code == 3, check.err
    assert [f["problem"] for f in check.json()["findings"] if f["check"] == "clusters"] == [
        f"clusters.old and clusters.new are the same cluster (id {check.json()['old']['cluster_id']}): the mirror "
        "would copy each topic onto itself"]
    mirror = cutover("mirror", "--plan", str(same.file), "--until-caught-up")
    assert mirror.code == 2, mirror.err
    assert "are the same cluster" in mirror.err and "Traceback" not in mirror.err
