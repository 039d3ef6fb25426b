"""`cutover assess` against the sandbox's real clusters: each verdict made to happen for real (a short
retention gives a replay-window blocker, a transactional producer is seen, a selected group also reads an
unselected topic, the clusters enforce no ACLs), the evidence exact, the report written, and a part out
of reach an unknown row, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from cutover.kafka.clients import ClusterRef
from cutover.kafka.offsets import log_offsets
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, produce
from tests.integration.mirror_util import commit


def _rows(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["kind"], r["key"]): r for r in doc["rows"]}


def test_assess_scores_the_sandbox_from_evidence(sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old = plan.cluster("old")
    orders, payments, other = f"{ns}.orders", f"{ns}.payments", f"{ns}.other"
    create_topic(old, orders, 2, **{"retention.ms": "600000"})  # 10 minutes: below the 1h gate
    create_topic(old, payments, 1)
    create_topic(old, other, 1)
    produce(old, orders, [{"value": b"x" * 100, "partition": i % 2} for i in range(30)])
    produce(old, other, [{"value": b"o"} for _ in range(3)])
    tx = Producer({**old, "transactional.id": f"{ns}-payments-app"})
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(5):
        tx.produce(payments, value=f"p{i}".encode(), partition=0)
    tx.commit_transaction(30)  # 5 records and a marker: the last stable offset is 6
    commit(old, f"{ns}.billing", {(orders, 0): 10, (orders, 1): 15, (other, 0): 3})
    plan_file = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, name=ns,
                       topics={"include": [f"{ns}\\.(orders|payments)"]}, groups={"include": [f"{ns}\\..*"]},
                       tables=[], readers=[], gates={"min_replay_window": "1h", "rollback_window": "30m"},
                       switch={"journal_dir": str(tmp_path / "journal")}).file

    run = cutover("assess", "--plan", str(plan_file), "--sample", "1", "--probe", "1", "--report",
                  str(tmp_path / "report"), "-o", "json")
    assert run.code == 3, run.err  # a blocker
    doc = run.json()
    rows = _rows(doc)
    assert not doc["ok"] and doc["counts"]["blocker"] >= 1

    replay = rows[("readiness", "replay-window")]
    assert replay["verdict"] == "blocker"
    assert [f["reason"] for f in replay["findings"]] == [
        f"{orders}: a writer down for 10m loses records (retention.ms 600000), below gates.min_replay_window 1h"]
    assert replay["drills"] == ["replay", "catalog-outage-during-shadow"]

    kafka = rows[("question", "kafka-semantics")]
    assert kafka["verdict"] == "risk"
    reasons = " | ".join(f["reason"] for f in kafka["findings"])
    assert f"transactional producers write here (1 id(s), e.g. {ns}-payments-app)" in reasons, reasons
    assert f"group {ns}.billing also reads {other}, which the plan does not select" in reasons
    assert kafka["evidence"]["transactional_ids"] == [f"{ns}-payments-app"]
    assert kafka["evidence"]["topics"][orders]["partitions"] == 2
    assert kafka["evidence"]["topics"][orders]["retention.ms"] == "600000"
    assert kafka["evidence"]["groups"][f"{ns}.billing"] == {"protocol": "classic", "members": 0,
                                                             "topics": [orders, other], "lag": 5}
    target = kafka["evidence"]["target_capabilities"]  # Apache Kafka 4.1: every one, by the list and the probe
    assert (target["cluster"], target["facts"]["markers_take_offsets"]) == ("new", True)
    assert [f["capability"] for f in target["findings"] if f["supported"] is not True] == []

    security = rows[("question", "security")]
    assert security["verdict"] == "risk"
    assert {f["reason"] for f in security["findings"]} >= {
        "the old cluster enforces no ACLs (no authorizer): any client may read and write every topic",
        "the new cluster enforces no ACLs (no authorizer): any client may read and write every topic",
        "the old cluster is reached without TLS (PLAINTEXT)"}
    assert security["evidence"]["old"] == {"protocol": "PLAINTEXT", "sasl": None, "acls_enforced": False}

    cost = rows[("question", "cost")]
    assert cost["evidence"]["records_to_mirror"] == 30 + 5  # records, not the marker's offset
    rollback = rows[("question", "rollback")]
    assert rollback["verdict"] == "risk" and rollback["evidence"]["last_switch_drill"] is None
    assert "no promote/rollback drill has passed for this plan" in rollback["reason"]
    assert rows[("question", "observability")]["verdict"] == "unknown"
    assert rows[("readiness", "offset-ownership")]["verdict"] == "risk"

    page = (tmp_path / "report" / "assessment.html").read_text()
    assert page.index("The seven questions") < page.index("Evidence") and "BLOCKER" in page and "<svg" in page
    assert json.loads((tmp_path / "report" / "assessment.json").read_text())["rows"] == doc["rows"]

    text = cutover("assess", "--plan", str(plan_file), "--sample", "0", "--probe", "0")
    assert text.code == 3 and "BLOCKER  Replay window" in text.out and "drill: cutover drill replay" in text.out


def test_nothing_selected_is_a_blocker_and_a_cluster_out_of_reach_is_unknown(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    plan_file = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, name=ns,
                       topics={"include": [f"{ns}\\.nothing"]}, tables=[], readers=[],
                       clusters={"old": plan.cluster("old"), "new": {"bootstrap.servers": "127.0.0.1:1"}},
                       switch={"journal_dir": str(tmp_path / "journal")}).file
    run = cutover("assess", "--plan", str(plan_file), "--sample", "0", "--probe", "0", "--timeout", "5", "-o", "json")
    assert run.code == 3 and "Traceback" not in run.err, run.err
    rows = _rows(run.json())
    kafka = rows[("question", "kafka-semantics")]
    assert kafka["verdict"] == "blocker" and "the plan selects no topic on the old cluster" in kafka["reason"]
    security = rows[("question", "security")]
    assert any(f["verdict"] == "unknown" and f["reason"].startswith(
        "whether the new cluster enforces ACLs: could not reach the new cluster (127.0.0.1:1)")
               for f in security["findings"]), security
    elasticity = rows[("readiness", "platform-elasticity")]
    assert elasticity["evidence"]["brokers"] == {"old": 1, "new": None}


#: What each row reads, per cluster: a row that depends on an unreachable cluster must be unknown for it.
_OLD_ROWS = [("question", "kafka-semantics"), ("question", "cost"), ("readiness", "replay-window"),
             ("readiness", "offset-ownership")]


#: How a cluster is out of reach: its client properties, given a port nothing listens on and a hanging one.
_OUT_OF_REACH = {
    "refused": lambda props, closed, _hung: {"bootstrap.servers": f"127.0.0.1:{closed}"},
    "hung": lambda props, _closed, hung: {"bootstrap.servers": f"127.0.0.1:{hung}"},
    "sasl-at-a-plaintext-listener": lambda props, _closed, _hung: {
        **props, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u",
        "sasl.password": "p"},
}
#: What the reason says, for each.
_WHY = {"refused": "nothing listens on", "hung": "accepted the connection but never answered",
        "sasl-at-a-plaintext-listener": "is not a SASL listener"}


@pytest.mark.parametrize("how", list(_OUT_OF_REACH))
@pytest.mark.parametrize("side", ["old", "new"])
def test_a_cluster_out_of_reach_gives_unknown_rows_naming_it_and_the_rest_is_scored(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path, side: str, how: str, closed_port: int,
        hung_host: tuple[int, list[Any]]) -> None:
    """Nothing listening on the port, a host that accepts and never answers, a client set up for another
    listener: the rows that read that cluster are unknown and name it and why, the others are scored, and
    the run ends within about one --timeout (the subprocess is given three). Before: 'unexpected
    KafkaException ... (a bug in cutover)' after 30 to 110 s."""
    old = plan.cluster("old")
    orders = f"{ns}.orders"
    create_topic(old, orders, 1)
    produce(old, orders, [{"value": b"x"} for _ in range(5)])
    broken = _OUT_OF_REACH[how](plan.cluster(side), closed_port, hung_host[0])
    address = broken["bootstrap.servers"]
    clusters = {"old": old, "new": plan.cluster("new"), side: broken}
    plan_file = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, name=ns,
                       topics={"include": [f"{ns}\\.orders"]}, groups={"include": [f"{ns}\\..*"]}, tables=[],
                       readers=[], clusters=clusters, switch={"journal_dir": str(tmp_path / "journal")}).file
    timeout = 10
    run = cutover("assess", "--plan", str(plan_file), "--sample", "1", "--probe", "1", "--timeout", str(timeout),
                  "-o", "json", timeout=3 * timeout)
    assert run.code == 0, run.err  # unknown is not a blocker
    assert "a bug in cutover" not in run.err and "Traceback" not in run.err, run.err
    rows = _rows(run.json())
    why = _WHY[how]
    named = f"could not reach the {side} cluster ({address})"

    def unknown_for_it(row: dict[str, Any]) -> bool:
        return any(f["verdict"] == "unknown" and named in f["reason"] and why in f["reason"] for f in row["findings"])

    security, elasticity = rows[("question", "security")], rows[("readiness", "platform-elasticity")]
    assert unknown_for_it(security) and unknown_for_it(elasticity), (security, elasticity)
    assert elasticity["verdict"] == "unknown"
    other = "new" if side == "old" else "old"
    assert elasticity["evidence"]["brokers"] == {side: None, other: 1}
    assert f"the {other} cluster enforces no ACLs (no authorizer): any client may read and write every topic" in [
        f["reason"] for f in security["findings"]]  # the other cluster is still read
    for key in _OLD_ROWS:
        if side == "old":
            assert rows[key]["verdict"] == "unknown" and unknown_for_it(rows[key]), rows[key]
        else:  # read from the old cluster alone, but what the new cluster can do (Kafka semantics kept there)
            about_new = [f["reason"] for f in rows[key]["findings"] if named in f["reason"]]
            assert len(about_new) == (key == ("question", "kafka-semantics")), rows[key]
            assert all(r.startswith("what the new cluster can do: ") and why in r for r in about_new), about_new
    if side == "new":
        assert rows[("question", "kafka-semantics")]["evidence"]["topics"][orders]["partitions"] == 1
        assert rows[("question", "cost")]["evidence"]["records_to_mirror"] == 5
        assert list(rows[("readiness", "replay-window")]["evidence"]["topics"]) == [orders]
    else:
        assert "0 selected topic(s)" not in run.err, run.err
    assert rows[("question", "table-semantics")]["verdict"] == "ready"


def test_records_are_counted_not_offsets_and_a_burst_does_not_make_a_rate(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    """100 records committed in 10 transactions, 5 more aborted (116 offsets: 11 markers, 5 aborted): 100
    records to mirror. 300 records written in one burst of a few ms on a topic kept by size (10 MiB): the
    produce rate is not 300 over those milliseconds (tens of thousands a second, a window of seconds: a
    false blocker), but at most 300 over a minute."""
    old = plan.cluster("old")
    tx_topic, burst = f"{ns}.payments", f"{ns}.clicks"
    create_topic(old, tx_topic, 1)
    create_topic(old, burst, 1, **{"retention.bytes": str(10 << 20)})
    producer = Producer({**old, "transactional.id": f"{ns}-payments-app"})
    producer.init_transactions(30)
    for batch in range(11):
        producer.begin_transaction()
        for _ in range(10 if batch < 10 else 5):
            producer.produce(tx_topic, value=b"t" * 100, partition=0)
        if batch < 10:
            producer.commit_transaction(30)
        else:
            assert producer.flush(30) == 0  # in the log before the abort: aborted records, then a marker
            producer.abort_transaction(30)
    produce(old, burst, [{"value": b"b" * 100} for _ in range(300)])
    assert log_offsets(ClusterRef("old", old), [(tx_topic, 0)], "end") == {(tx_topic, 0): 116}
    plan_file = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, name=ns,
                       topics={"include": [f"{ns}\\.(payments|clicks)"]}, tables=[], readers=[],
                       gates={"min_replay_window": "1h"}, switch={"journal_dir": str(tmp_path / "journal")}).file

    run = cutover("assess", "--plan", str(plan_file), "--sample", "1", "--probe", "0", "-o", "json")
    doc = run.json()
    assert doc["topics"][burst]["rate"] <= 300 / 60, doc["topics"][burst]
    assert doc["topics"][tx_topic]["records"] == 100  # not 116 offsets
    assert doc["topics"][burst]["records"] == 300
    cost = _rows(doc)[("question", "cost")]["evidence"]
    assert (cost["records_to_mirror"], cost["records_exact"], cost["bytes_to_mirror"]) == (400, True, 400 * 100)
    assert 0 < doc["topics"][burst]["rate"] <= 300 / 60
    replay = _rows(doc)[("readiness", "replay-window")]
    assert replay["verdict"] == "ready", replay
    assert replay["evidence"]["topics"][burst]["decided_by"].startswith(f"retention.bytes {10 << 20} per partition")
    assert run.code == 0, run.err


@pytest.mark.parametrize("catalog", ["sqlite-file-missing", "rest-hung"])
def test_a_catalog_that_cannot_be_used_is_a_storage_blocker_and_its_tables_are_not_asked(
        sandbox: Sandbox, ns: str, tmp_path: Path, catalog: str, hung_host: tuple[int, list[Any]]) -> None:
    """(Table pairs and no catalog, once 'unexpected AssertionError', are now refused as the plan is read.) A SQLite
    catalog whose
    file does not exist (was: assess created an empty catalog file and called the storage ready); a REST catalog
    that never answers (was: no end, each table asked without a deadline). Each is named in the storage row,
    the tables are unknown with the same reason, nothing is created, and the run ends within about one timeout."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    catalogs: dict[str, Any] = {
        "sqlite-file-missing": {"name": "c", "type": "sql", "uri": f"sqlite:///{tmp_path}/absent.db",
                                "warehouse": f"file://{warehouse}"},
        "rest-hung": {"name": "c", "type": "rest", "uri": f"http://127.0.0.1:{hung_host[0]}",
                      "warehouse": f"file://{warehouse}"}}
    plan_file = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=False, name=ns,
                       topics={"include": [f"{ns}\\.nothing"]}, readers=[], catalog=catalogs[catalog],
                       tables=[{"topic": f"{ns}.orders", "old": "legacy.orders", "new": "cutover.orders",
                                "format": "json"}], switch={"journal_dir": str(tmp_path / "journal")}).file
    timeout = 10
    run = cutover("assess", "--plan", str(plan_file), "--sample", "0", "--probe", "0", "--timeout", str(timeout),
                  "-o", "json", timeout=3 * timeout)
    assert run.code == 3 and "a bug in cutover" not in run.err and "Traceback" not in run.err, run.err
    rows = _rows(run.json())
    why = {"sqlite-file-missing": f"the SQLite file {tmp_path}/absent.db does not exist (assess does not create it)",
           "rest-hung": f"catalog c at http://127.0.0.1:{hung_host[0]} did not answer within {timeout}s"}[catalog]
    storage = rows[("question", "storage")]
    assert storage["verdict"] == "blocker" and why in storage["reason"], storage
    commits = rows[("readiness", "table-commits")]
    assert commits["verdict"] == "unknown" and len(commits["findings"]) == 2, commits
    assert all(why in f["reason"] for f in commits["findings"]), commits
    assert not (tmp_path / "absent.db").exists()


def test_prometheus_that_is_another_http_server_is_named_so(
        sandbox: Sandbox, ns: str, tmp_path: Path, http_port: int) -> None:
    """observability.prometheus at a web server that is not Prometheus (was: 'did not answer ...: File not
    found', though it answered)."""
    plan_file = derive(sandbox.plan_file, tmp_path / "plan.yaml", merge=True, name=ns, tables=[], readers=[],
                       topics={"include": [f"{ns}\\.nothing"]}, switch={"journal_dir": str(tmp_path / "journal")},
                       observability={"prometheus": f"http://127.0.0.1:{http_port}"}).file
    run = cutover("assess", "--plan", str(plan_file), "--sample", "0", "--probe", "0", "-o", "json")
    assert run.code == 3, run.err  # nothing selected
    row = _rows(run.json())[("question", "observability")]
    assert row["verdict"] == "unknown" and row["reason"] == (
        f"Prometheus: http://127.0.0.1:{http_port} answered /api/v1/targets?state=active with HTTP 404 (File not "
        "found): not Prometheus's HTTP API at that URL"), row
