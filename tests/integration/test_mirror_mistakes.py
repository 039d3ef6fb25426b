"""Mistakes an operator makes with the mirror, against the real sandbox: one cluster named twice under two
addresses, and two shard layouts run side by side. Each is said at once, and nothing is copied twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cutover.kafka.clients import ClusterRef, admin
from cutover.local.sandbox import Sandbox
from cutover.mirror.shard import Shard
from cutover.plan import Plan, derive
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import content, scoped_plan, start_mirror, stop


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


def test_a_second_shard_layout_started_beside_a_running_one_fences_it_instead_of_copying_twice(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 4)
    produce(old, topic, [{"value": b"%d" % i, "partition": i % 4} for i in range(40)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path, state_prefix=f"__cutover_{ns}")
    whole = start_mirror(scoped)  # layout 0/1: every partition
    wait_for(lambda: len(read_all(new, topic, 4, timeout=5)) == 40 if _exists(new, topic) else False, 90,
             "the mirror of layout 0/1 to copy the records")
    half = next(Shard(i, 2) for i in (0, 1) if any(Shard(i, 2).owns(topic, p) for p in range(4)))
    err_file = tmp_path / "half.err"
    with err_file.open("w") as err:
        second = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(scoped), "--shard",
                                   str(half)], stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        wait_for(lambda: "fenced the forward mirror's shard 0/1 (pid " in err_file.read_text(), 90,
                 "the second layout to say it fenced the first")
        sent = 0

        def fenced() -> bool:  # the first learns it at its next transaction: give it one
            nonlocal sent
            produce(old, topic, [{"value": b"after %d" % sent, "partition": sent % 4}])
            sent += 1
            return whole.poll() is not None
        wait_for(fenced, 90, "the first layout to stop, fenced", interval=0.5)
        err = whole.stderr.read() if whole.stderr else ""
        assert whole.returncode == 1 and "the forward mirror's shard 0/1 was taken over by another mirror process" \
            in err and f"the forward mirror's shard {half} runs now as pid {second.pid} on host " in err, err[-2000:]
        mine = [p for p in range(4) if half.owns(topic, p)]
        wait_for(lambda: len([r for r in read_all(new, topic, 4) if r.partition in mine]) ==
                 len([r for r in read_all(old, topic, 4) if r.partition in mine]), 90,
                 "the second layout to copy its partitions' new records")
        code, _out, _err = stop(second)
        assert code == 0, err_file.read_text()[-2000:]
    finally:
        for proc in (whole, second):
            if proc.poll() is None:
                proc.kill()
    # each of its partitions exactly once: nothing copied by both layouts
    assert content([r for r in read_all(new, topic, 4) if r.partition in mine]) == \
        content([r for r in read_all(old, topic, 4) if r.partition in mine])


def _exists(props: dict[str, str], topic: str) -> bool:
    from confluent_kafka.admin import AdminClient

    return topic in AdminClient(dict(props)).list_topics(timeout=10).topics


def test_a_replication_factor_the_new_cluster_cannot_give_is_named_as_its_answer_not_as_unreachable(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    """mirror.replication_factor 3 against the sandbox's one broker: the new cluster answered, refusing the topics'
    replication factor. It was 'could not reach the new cluster ... check bootstrap.servers' (exit 1): the wrong
    cause and a fix that cannot help. Now its answer, the plan key and exit 2, and nothing created."""
    old, topic, prefix = plan.cluster("old"), f"{ns}.orders", f"__cutover_{ns}"
    create_topic(old, topic, 1)
    three = derive(scoped_plan(sandbox.plan_file, ns, tmp_path, state_prefix=prefix), tmp_path / "three.yaml",
                   merge=True, mirror={"replication_factor": 3})
    run = cutover("mirror", "--plan", str(three.file), "--until-caught-up", "--timeout", "20")
    assert run.code == 2, (run.code, run.err)
    assert "could not reach" not in run.err, run.err
    assert f"the new cluster ({plan.cluster('new')['bootstrap.servers']}) refused " in run.err, run.err
    assert "replication factor" in run.err.lower() and "fix: set mirror.replication_factor" in run.err, run.err
    listed = admin(ClusterRef.of(plan, "new")).list_topics(timeout=30).topics
    assert topic not in listed and not [t for t in listed if t.startswith(prefix)]
