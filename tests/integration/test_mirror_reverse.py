"""The reverse mirror (new -> old) and the commands of its direction, against the real sandbox: refused before
any promote, writing nothing on the old cluster."""

from __future__ import annotations

from pathlib import Path

from cutover.kafka.clients import ClusterRef
from cutover.kafka.inspect import list_groups
from cutover.kafka.offsets import commit_group
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, load_plan
from tests.conftest import cutover
from tests.integration.kafka_util import create_topic, produce
from tests.integration.mirror_util import scoped_plan, switch_marked


def _old_side(plan: Plan, ns: str) -> tuple[list[str], list[str]]:
    """The old cluster's topics and groups of this test (its names, its state prefix): what a reverse command
    would write there. The sandbox is shared, so only this test's names are compared."""
    from cutover.kafka.clients import admin

    old = ClusterRef.of(plan, "old")
    topics = sorted(t for t in admin(old).list_topics(timeout=30).topics if ns in t)
    return topics, [g for g in list_groups(old, 30) if ns in g]


def test_every_reverse_command_before_any_promote_is_refused_and_writes_nothing(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, topic = plan.cluster("old"), f"{ns}.orders"
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(20)])
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path, state_prefix=f"__cutover_{ns}")
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0
    # a group on the new cluster alone: a reverse sync would commit it on the old one
    commit_group(ClusterRef.of(plan, "new"), f"{ns}.app", {(topic, 0): 4, (topic, 1): 6})
    before = _old_side(load_plan(scoped), ns)
    assert before == ([topic], [])

    for args in (["mirror", "--reverse", "--until-caught-up"], ["mirror", "--reverse"],
                 ["offsets", "sync", "--reverse"], ["mirror", "status", "--reverse"],
                 ["offsets", "translate", "--reverse", "--group", f"{ns}.app"]):
        run = cutover(*args, "--plan", str(scoped))
        assert run.code == 3, (args, run.code, run.err)
        assert "there has been no promote of plan" in run.err and "fix: " in run.err, (args, run.err)
        assert "Traceback" not in run.err and run.out == "", (args, run.out)
        assert _old_side(load_plan(scoped), ns) == before, args
    # the forward mirror goes on as before
    assert cutover("mirror", "--plan", str(scoped), "--until-caught-up").code == 0

    # After a rollback the clients write to the old cluster again: what writes new -> old is refused, what
    # reads the reverse direction's story answers.
    switch_marked(scoped, "open", "rollback")
    for args in (["mirror", "--reverse", "--until-caught-up"], ["offsets", "sync", "--reverse"]):
        run = cutover(*args, "--plan", str(scoped))
        assert run.code == 3 and f"plan {ns} was rolled back (cutover rollback run test-rollback" in run.err, \
            (args, run.err)
        assert "fix: drop --reverse" in run.err and _old_side(load_plan(scoped), ns) == before, args
    shown = cutover("mirror", "status", "--reverse", "--plan", str(scoped), "-o", "json")
    assert shown.code == 0 and shown.json()["direction"] == "reverse", shown.err
    assert _old_side(load_plan(scoped), ns) == before
