"""Mistakes an operator makes with the mirror, against the real sandbox: one cluster named twice under two
addresses. Each is said at once, and nothing is written."""

from __future__ import annotations

from pathlib import Path

from cutover.kafka.clients import ClusterRef, admin
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, produce
from tests.integration.mirror_util import scoped_plan


def test_one_cluster_under_two_addresses_is_refused_by_every_mirror_command_before_anything_is_written(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, topic, prefix = plan.cluster("old"), f"{ns}.orders", f"__cutover_{ns}"
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(10)])
    port = old["bootstrap.servers"].rsplit(":", 1)[1]
    # localhost for 127.0.0.1: not the same address, so the plan itself is valid
    twice = derive(scoped_plan(sandbox.plan_file, ns, tmp_path, state_prefix=prefix), tmp_path / "twice.yaml",
                   merge=True, clusters={"new": {"bootstrap.servers": f"localhost:{port}"}})
    for args in (["mirror", "--until-caught-up"], ["mirror", "status"], ["offsets", "sync"],
                 ["offsets", "translate", "--group", f"{ns}.app"]):
        run = cutover(*args, "--plan", str(twice.file))
        assert run.code == 2, (args, run.code, run.out, run.err)
        assert (f"the old cluster ({old['bootstrap.servers']}) and the new cluster (localhost:{port}) are the same "
                "cluster (id " in run.err and "fix: give clusters.new the brokers" in run.err), (args, run.err)
        assert run.out == "" and not [t for t in admin(ClusterRef.of(plan, "old")).list_topics(timeout=30).topics
                                      if t.startswith(prefix)], args
