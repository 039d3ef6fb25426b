"""The scorecard's rules on evidence given directly (pure logic: the live reading is tested in
tests/integration/test_assess.py)."""

from __future__ import annotations

import math
from pathlib import Path

from cutover.assess import score
from cutover.assess.facts import GroupFacts, TopicFacts, Unknown
from cutover.assess.model import Finding, Row
from cutover.kafka.producers import Producer, Transaction, Writers
from cutover.plan import Plan, load_plan


def _plan(tmp_path: Path, extra: str = "") -> Plan:
    (tmp_path / "plan.yaml").write_text(
        "name: p\nclusters:\n  old: {bootstrap.servers: '127.0.0.1:1', sasl.password: hunter2}\n"
        "  new: {bootstrap.servers: '127.0.0.1:2', sasl.password: '${NEW_PASSWORD}'}\n" + extra)
    return load_plan(tmp_path / "plan.yaml", environ={"NEW_PASSWORD": "x"})


def _topic(name: str = "orders", **configs: str) -> TopicFacts:
    # 1,000 records of 100 bytes over 1,000 s: 1 record/s, 100 B/s over 2 partitions
    return TopicFacts(name, 2, {"cleanup.policy": "delete", **configs}, {0: (0, 500), 1: (0, 500)},
                      1_000_000, 2_000_000, 100.0)


def _evidence(plan: Plan, **changes: object) -> score.Evidence:
    base = dict(plan=plan, selected=["orders"], topics={"orders": _topic(**{"retention.ms": "604800000"})},
                groups=[], writers=Writers((), ()), readers=[],
                sides={"old": score.Side("SSL", None, 3, True), "new": score.Side("SSL", None, 3, True)},
                rights=None, tables={}, throughput=1000.0, drills=[], lake={}, prometheus=None)
    base.update(changes)
    return score.Evidence(**base)  # type: ignore[arg-type]


def _row(rows: list[Row], key: str, kind: str = "question") -> Row:
    return next(r for r in rows if r.key == key and r.kind == kind)


def test_the_replay_window_is_the_tighter_of_the_time_and_the_size_limit() -> None:
    assert score.replay_window(_topic(**{"retention.ms": "3600000"})) == (3600.0, "retention.ms 3600000")
    # 50 B/s a partition: 10,000 bytes last 200 s
    assert score.replay_window(_topic(**{"retention.ms": "3600000", "retention.bytes": "10000"})) == (
        200.0, "retention.bytes 10000 per partition at 50 B/s")
    assert score.replay_window(_topic(**{"retention.ms": "-1"})) == (math.inf, "no retention limit")
    assert score.replay_window(_topic(**{"cleanup.policy": "compact", "retention.ms": "1"}))[0] == math.inf
    assert [score.duration(s) for s in (45, 600, 7200 + 600, 3 * 86400 + 4 * 3600, math.inf)] == [
        "45s", "10m", "2h 10m", "3d 4h", "unlimited"]


def test_records_are_counted_where_read_whole_and_estimated_from_the_tail_elsewhere() -> None:
    # partition 0 read whole: 90 records in 100 offsets; partition 1 only its tail: 45 records in 50 of 1,000
    facts = TopicFacts("t", 2, {}, {0: (0, 100), 1: (0, 1000)}, 0, 3_600_000, 10.0, {0: (90, 100), 1: (45, 50)})
    assert (facts.records, facts.exact, facts.share) == (90 + 900, False, 990 / 1100)
    assert TopicFacts("t", 1, {}, {0: (5, 15)}, 0, 1, 10.0, {0: (8, 10)}).exact
    assert TopicFacts("t", 1, {}, {0: (5, 15)}, 0, 1, 10.0).records == 10  # not read: its offsets


def test_a_burst_is_spread_over_a_minute_at_least() -> None:
    burst = TopicFacts("t", 1, {}, {0: (0, 300)}, 1_000_000, 1_000_002, 100.0)  # 300 records in 2 ms
    assert burst.average_rate == 300 / 60
    steady = TopicFacts("t", 1, {}, {0: (0, 3600)}, 0, 3_600_000, 100.0)  # one a second for an hour
    assert steady.average_rate == 1.0
    assert TopicFacts("t", 1, {}, {0: (0, 0)}, None, 5, 1.0).average_rate is None


def test_a_row_is_as_bad_as_its_worst_finding() -> None:
    row = Row("k", "question", "K", [Finding("risk", "a"), Finding("unknown", "b"), Finding("risk", "c")])
    assert row.verdict == "risk" and row.reason == "a; c"
    row.findings.append(Finding("blocker", "d"))
    assert row.verdict == "blocker" and row.reason == "d"
    assert Row("k", "question", "K", []).verdict == "ready"


def test_the_rules(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "gates: {min_replay_window: 2h}\n")
    rows = score.score(_evidence(plan))
    assert _row(rows, "kafka-semantics").verdict == "ready"
    assert _row(rows, "replay-window", "readiness").verdict == "ready"
    security = _row(rows, "security")
    assert security.evidence["secrets_inline"] == ["clusters.old.sasl.password"]  # the other is ${NEW_PASSWORD}
    assert security.verdict == "risk" and "clusters.old.sasl.password" in security.reason

    short = _evidence(plan, topics={"orders": _topic(**{"retention.ms": "3600000"})})
    replay = _row(score.score(short), "replay-window", "readiness")
    assert replay.verdict == "blocker" and replay.reason == (
        "orders: a writer down for 1h loses records (retention.ms 3600000), below gates.min_replay_window 2h")

    writers = Writers((Transaction("app-1", 7, "Ongoing"), Transaction("elsewhere", 8, "Ongoing"),
                       Transaction("__cutover.mirror.reverse.p.shard-0-of-1", 9, "Empty")),
                      (Producer("orders", 0, 7, 0, 1, 40), Producer("orders", 1, 9, 0, 1, None)))
    groups = [GroupFacts("billing", "stable", "consumer", 2, ["orders", "audit"], {"orders": 3})]
    kafka = _row(score.score(_evidence(plan, writers=writers, groups=groups)), "kafka-semantics")
    assert kafka.verdict == "risk" and kafka.evidence["open_transactions"] == ["orders[0]"]
    assert "group billing also reads audit" in kafka.reason and "app-1" in kafka.reason
    assert kafka.evidence["transactional_ids"] == ["app-1"]  # not another topic's, not cutover's own mirror
    assert kafka.evidence["groups"]["billing"]["protocol"] == "consumer"

    nothing = _row(score.score(_evidence(plan, selected=[])), "kafka-semantics")
    assert nothing.verdict == "blocker" and "selects no topic" in nothing.reason
    refused = _row(score.score(_evidence(plan, writers=Unknown("the cluster refused DescribeProducers"))),
                   "kafka-semantics")
    assert refused.verdict == "unknown" and "refused DescribeProducers" in refused.reason


def test_registry_authentication_and_tls_are_evidence(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "registry:\n  old: {url: 'http://127.0.0.1:8081'}\n"
                 "  new: {url: 'https://127.0.0.1:8082', basic.auth.user.info: '${NEW_PASSWORD}'}\n")
    security = _row(score.score(_evidence(plan)), "security")
    assert security.evidence["registry_auth"] == {"old": "none", "new": "credentials"}
    assert "the old schema registry is reached without TLS" in security.reason


def test_rollback_needs_the_reverse_mirror_retention_and_a_passed_drill(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "switch: {reverse_mirror: false}\ngates: {rollback_window: 2d}\n")
    rollback = _row(score.score(_evidence(plan)), "rollback")
    assert rollback.verdict == "blocker" and "reverse_mirror is off" in rollback.reason
    assert [f.verdict for f in rollback.findings] == ["blocker", "risk"]  # no drill; 7 days of retention keep 2
    plan = _plan(tmp_path, "gates: {rollback_window: 8d}\n")
    drill = {"runbook": "full-migration", "passed": True, "ended": 1.0}
    rollback = _row(score.score(_evidence(plan, drills=[drill])), "rollback")
    assert rollback.verdict == "risk" and rollback.evidence["last_switch_drill"] == drill
    assert "less than the rollback window (8d), e.g. orders: 7d" in rollback.reason


def test_cost_in_money_only_with_the_plan_s_prices(tmp_path: Path) -> None:
    cost = _row(score.score(_evidence(_plan(tmp_path))), "cost")
    assert cost.evidence["bytes_to_mirror"] == 100_000 and cost.evidence["backfill_time"] == "1m 40s"
    assert cost.evidence["estimate"].startswith("no prices in the plan")
    plan = _plan(tmp_path, "mirror: {replication_factor: 3}\nprices: {currency: EUR, kafka_gb_month: 100, "
                 "transfer_gb: 10}\n")
    cost = _row(score.score(_evidence(plan)), "cost")
    assert cost.evidence["estimate"] == {"new cluster storage a month": "0.03 EUR",
                                         "backfill transfer, once": "0.00 EUR"}


def test_a_drill_run_is_remembered_for_the_plan(tmp_path: Path) -> None:
    from cutover.assess.gather import drills
    from cutover.drill.model import Runbook
    from cutover.drill.runner import _remember

    plan = _plan(tmp_path)
    assert drills(plan) == []
    runbook = Runbook("full-migration", "", tmp_path / "full-migration.yaml", {}, {}, [])
    _remember(plan, runbook, {"passed": True, "started": 1.0, "ended": 2.0}, tmp_path / "r")
    _remember(plan, runbook, {"passed": False, "started": 3.0, "ended": 4.0}, tmp_path / "r2")
    assert [(d["runbook"], d["passed"], d["ended"]) for d in drills(plan)] == [
        ("full-migration", True, 2.0), ("full-migration", False, 4.0)]


def test_a_metrics_port_of_the_plan_that_prometheus_does_not_scrape_is_a_risk(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "observability:\n  prometheus: http://127.0.0.1:9\n"
                           "  ports: {mirror: 9400, reverse_mirror: 9405, exporter: 9420}\n")
    seen = {"url": "http://127.0.0.1:9", "rules": 11, "targets": [
        {"job": "cutover-mirror", "url": "http://10.0.0.5:9400/metrics", "health": "up"},
        {"job": "cutover-exporter", "url": "http://10.0.0.6:9420/metrics", "health": "up"}]}
    row = _row(score.score(_evidence(plan, prometheus=seen)), "observability")
    assert row.verdict == "risk" and row.evidence["unscraped_ports"] == {"reverse_mirror": 9405}
    assert [f.reason for f in row.findings] == ["the reverse mirror serves its metrics on port 9405 "
                                              "(observability.ports) but no cutover target of Prometheus is on "
                                              "that port"]
    seen["targets"].append({"job": "cutover-reverse-mirror", "url": "http://10.0.0.5:9405/metrics", "health": "up"})
    assert _row(score.score(_evidence(plan, prometheus=seen)), "observability").verdict == "ready"


def test_a_target_without_what_the_mirror_needs_is_a_blocker_and_other_gaps_are_risks(tmp_path: Path) -> None:
    from cutover.kafka import capabilities
    from tests.unit.kafka.test_capabilities import KAFKA, TANSU

    plan = _plan(tmp_path, "")
    tansu = capabilities.merge(capabilities.from_apis("new", TANSU), {
        "headers": (True, "the records' headers read back as written"),
        "read-committed": (None, "no transaction could be ended")})
    row = _row(score.score(_evidence(plan, target=tansu)), "kafka-semantics")
    assert row.verdict == "blocker"
    verdicts = {f.reason.split(" (")[0]: f.verdict for f in row.findings}
    assert verdicts == {"the new cluster lacks transactions": "blocker",
                        "the new cluster lacks describe-producers": "risk",
                        "the new cluster lacks list-transactions": "risk", "the new cluster lacks acls": "risk",
                        "the new cluster lacks create-partitions": "risk",
                        "the new cluster lacks new-consumer-groups": "risk",
                        "whether the new cluster keeps read-committed: no transaction could be ended": "unknown",
                        "whether the new cluster keeps timestamps: told only by the real probe": "unknown"}
    assert row.evidence["target_capabilities"]["cluster"] == "new"
    kafka = capabilities.merge(capabilities.from_apis("new", KAFKA), {
        n: (True, "seen") for n in ("read-committed", "timestamps", "headers")})
    assert _row(score.score(_evidence(plan, target=kafka)), "kafka-semantics").findings == []
    nothing = _row(score.score(_evidence(plan, selected=[], target=tansu)), "kafka-semantics")
    assert "the new cluster lacks transactions" in nothing.reason  # said even when nothing is selected
    out = _row(score.score(_evidence(plan, target=score.Unknown("the new cluster did not answer"))),
               "kafka-semantics")
    assert out.findings == [Finding("unknown", "what the new cluster can do: the new cluster did not answer")]
