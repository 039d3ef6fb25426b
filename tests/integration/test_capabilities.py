"""The capability probe against Apache Kafka: every capability cutover asks for is there, each answer checked
by what it saw, and the scratch topic is gone after. (Against Tansu: tests/integration/test_tansu.py.)"""

from __future__ import annotations

import json

from confluent_kafka.admin import AdminClient

from cutover.kafka import capabilities
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan
from tests.conftest import cutover


def _probe_topics(props: dict[str, str]) -> list[str]:
    return [t for t in AdminClient(dict(props)).list_topics(timeout=30).topics if t.startswith("__cutover-probe-")]


def test_apache_kafka_has_every_capability_and_the_scratch_topic_is_deleted(plan: Plan) -> None:
    props = dict(plan.cluster("new"))
    report = capabilities.probe(props, "new", 30)
    assert {f.capability.name: f.supported for f in report.findings} == dict.fromkeys(
        (c.name for c in capabilities.CAPABILITIES), True), [f.as_dict() for f in report.findings]
    assert report.get("transactions").evidence == "a transaction was committed and another aborted"
    assert report.get("read-committed").evidence == "read_committed hid the aborted record, read_uncommitted showed it"
    assert report.get("timestamps").evidence == ("records written with timestamps 1600000000000, 1600000000001 "
                                                 "read back with 1600000000000, 1600000000001")
    assert report.get("headers").evidence == "the records' headers read back as written"
    # 2 records, then a committed and an aborted transaction of one record each, each with its marker
    assert report.facts["end_offset_after_probe"] == 6 and report.facts["markers_take_offsets"] is True
    assert report.apis is not None and report.apis[26][1] >= 3  # EndTxn, as Kafka 4.1 lists it
    assert _probe_topics(props) == []


def test_plan_check_lists_each_clusters_capabilities_and_finds_nothing_missing(sandbox: Sandbox) -> None:
    run = cutover("plan", "check", "--plan", str(sandbox.plan_file), "-o", "json", timeout=120)
    report = json.loads(run.out)
    for side in ("old", "new"):
        found = report[side]["capabilities"]
        assert found["cluster"] == side and found["apis"]["EndTxn"][0] == 0
        listed = {f["capability"]: f["supported"] for f in found["findings"]}
        assert all(listed[c.name] is True for c in capabilities.CAPABILITIES if c.apis), listed
        assert all(listed[c.name] is None for c in capabilities.CAPABILITIES if not c.apis), listed  # probe only
    assert not [f for f in report["findings"] if f["check"] == "capabilities"]
    text = cutover("plan", "check", "--plan", str(sandbox.plan_file), timeout=120).out
    assert text.count("  capabilities: every API cutover asks for is listed") == 2, text
