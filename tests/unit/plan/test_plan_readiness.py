"""What `plan check` finds that a later command would refuse (pure: the plan and the names the
old cluster holds). The live path runs in tests/integration/test_sandbox.py."""

from __future__ import annotations

from pathlib import Path

from cutover.plan import readiness
from tests.unit.switch.switch_support import unit_plan

OLD_TOPICS = ["orders", "orders.eu", "payments"]
OLD_GROUPS = ["billing", "audit"]


def _problems(found: list[readiness.Finding]) -> list[str]:
    return [f"{f.check}: {f.problem} | {f.fix}" for f in found]


def test_a_selection_that_matches_nothing_is_a_finding_and_the_default_for_groups_is_not(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path, topics={"include": ["orders", "order"]}, groups={"include": ["bill"]})
    found = _problems(readiness.online(plan, OLD_TOPICS, OLD_GROUPS))
    assert found == [
        "topics: topics.include[1] 'order' matches no topic on the old cluster (3 there) | patterns are regular "
        "expressions that must match the whole name (it matches part of orders, orders.eu: write order.* or the "
        "full name)",
        "groups: groups.include[0] 'bill' matches no consumer group on the old cluster (2 there) | patterns are "
        "regular expressions that must match the whole name (it matches part of billing: write bill.* or the full "
        "name)"]
    # everything excluded: the mirror would refuse an empty selection
    plan = unit_plan(tmp_path, topics={"exclude": [".*"]})
    assert [f.problem for f in readiness.online(plan, OLD_TOPICS, OLD_GROUPS)] == [
        "the plan selects no topic on the old cluster (3 there, 1 exclude pattern(s))",
        "tables[0].topic orders is left out by topics.exclude[0] '.*': the mirror never copies it, so the shadow "
        "finds nothing of it on the new cluster"]
    # the default selection: no topic at all is a finding (nothing to mirror), no group is not
    plan = unit_plan(tmp_path)
    assert [f.check for f in readiness.online(plan, [], [])] == ["topics", "tables"]  # nothing, not even its table's
    assert readiness.online(plan, OLD_TOPICS, []) == []
    assert readiness.online(plan, None, None) == []  # the cluster did not answer: reported there


def test_hooks_that_are_missing_not_executable_or_not_on_path_are_findings(tmp_path: Path) -> None:
    ok = tmp_path / "ok.sh"
    ok.write_text("#!/bin/sh\n")
    ok.chmod(0o755)
    (tmp_path / "plain.sh").write_text("#!/bin/sh\n")
    plan = unit_plan(tmp_path, hooks={"freeze_producers": "./ok.sh --now", "resume": "./plain.sh",
                                      "stop_consumers": "./gone.sh", "switch_clients": "no-such-command-xyz a b",
                                      "on_success": "true"})
    assert _problems(readiness.offline(plan)) == [
        f"hooks: hooks.resume: {tmp_path / 'plain.sh'} is not executable | chmod +x {tmp_path / 'plain.sh'}",
        f"hooks: hooks.stop_consumers: {tmp_path / 'gone.sh'} does not exist | create the script, or fix the path "
        f"(a relative path is from the plan's folder, {tmp_path})",
        "hooks: hooks.switch_clients: the command 'no-such-command-xyz' is not on PATH | install it, or give its "
        "path (a relative path is from the plan's folder)"]


def test_a_sqlite_catalog_file_that_does_not_exist_is_a_finding_and_is_not_created(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    plan = unit_plan(tmp_path, catalog={"uri": f"sqlite:///{db}"})
    found = readiness.offline(plan)
    assert [f.problem for f in found] == [
        f"catalog.uri sqlite:///{db}: the SQLite file {db} does not exist (plan check does not create it)"]
    assert not db.exists()
    db.write_bytes(b"")
    assert readiness.offline(plan) == []
    assert readiness.sqlite_path("sqlite:///relative/c.db") == Path("relative/c.db")
    assert readiness.sqlite_path("sqlite:///:memory:") is None


def test_rights_the_principal_lacks_are_findings_and_write_on_old_only_with_the_reverse_mirror(
        tmp_path: Path) -> None:
    reads = frozenset({"READ", "DESCRIBE", "DESCRIBE_CONFIGS"})
    plan = unit_plan(tmp_path)
    old = {"orders": reads, "payments": frozenset({"DESCRIBE"}), "unsaid": None}
    assert _problems(readiness.rights(plan, "old", "User:reader", old)) == [
        "rights: User:reader on the old cluster may not READ payments: the mirror needs it (it reads the topics, "
        "their configs and the groups' offsets) | grant READ on the selected topics to User:reader on the old "
        "cluster",
        "rights: User:reader on the old cluster may not DESCRIBE_CONFIGS payments: the mirror needs it (it reads the "
        "topics, their configs and the groups' offsets) | grant DESCRIBE_CONFIGS on the selected topics to "
        "User:reader on the old cluster",
        "rights: User:reader on the old cluster may not WRITE orders, payments: the reverse mirror (started at "
        "promote) needs it (rollback carries the records written on the new cluster back there) | grant WRITE on "
        "the selected topics to User:reader on the old cluster, or set switch.reverse_mirror: false (a read-only "
        "principal is enough then, but rollback cannot carry back what was written on the new cluster)"]
    one_way = unit_plan(tmp_path, switch={"reverse_mirror": False})
    assert readiness.rights(one_way, "old", "User:reader", {"orders": reads}) == []
    assert [f.problem for f in readiness.rights(plan, "new", "User:m", {"orders": reads})] == [
        "User:m on the new cluster may not WRITE orders: the mirror needs it (it writes the copies, in transactions)"]
    everything = {f"t{i}": frozenset() for i in range(7)}
    assert "t0, t1, t2, t3, t4 and 2 more" in readiness.rights(plan, "new", "User:m", everything)[0].problem


def test_a_table_topic_the_old_cluster_lacks_is_named_as_missing_not_as_unselected(tmp_path: Path) -> None:
    pairs = [{"topic": t, "old": f"legacy.t{i}", "new": f"cutover.t{i}"}
             for i, t in enumerate(["orders", "payment", "refunds", "orders.eu"])]
    plan = unit_plan(tmp_path, topics={"include": ["orders", "payments?"]}, tables=pairs)
    # offline: the selection is all that is known
    assert [f.problem.split(":")[0] for f in readiness.offline(plan)] == [
        "tables[2].topic refunds is not in the plan's topic selection (topics.include / exclude)",
        "tables[3].topic orders.eu is not in the plan's topic selection (topics.include / exclude)"]
    # online: a topic the old cluster lacks is named so, selected or not; a topic it holds but the plan leaves out
    # is still "select it"
    found = _problems(readiness.online(plan, OLD_TOPICS, OLD_GROUPS))
    assert found == [
        "tables: tables[1].topic payment does not exist on the old cluster (3 topics there): the shadow would find "
        "no record of it | correct the table pair's topic (did you mean payments?), or create the topic on the old "
        "cluster first",
        "tables: tables[2].topic refunds does not exist on the old cluster (3 topics there): the shadow would find "
        "no record of it | correct the table pair's topic, or create the topic on the old cluster first",
        "tables: tables[3].topic orders.eu is not in the plan's topic selection (topics.include / exclude): the "
        "mirror never copies it, so the shadow finds nothing of it on the new cluster | select orders.eu in "
        "topics.include, or correct the table pair's topic"]
    assert readiness.online(plan, None, None) == []  # the cluster did not answer: the offline findings stand


def test_a_hook_that_is_a_folder_and_a_table_topic_an_exclude_leaves_out_are_named_so(tmp_path: Path) -> None:
    (tmp_path / "hooks").mkdir()
    plan = unit_plan(tmp_path, hooks={"freeze_producers": "./hooks"}, topics={"exclude": ["ord.*", "x"]})
    assert _problems(readiness.offline(plan)) == [
        f"hooks: hooks.freeze_producers: {tmp_path / 'hooks'} is a folder, not a script | give the script in it, "
        f"e.g. {tmp_path / 'hooks'}/freeze_producers.sh",
        "tables: tables[0].topic orders is left out by topics.exclude[0] 'ord.*': the mirror never copies it, so the "
        "shadow finds nothing of it on the new cluster | narrow topics.exclude[0] so that it leaves orders in, or "
        "correct the table pair's topic"]


def test_an_old_table_the_catalog_lacks_is_a_finding_and_a_new_one_is_not(tmp_path: Path) -> None:
    plan = unit_plan(tmp_path)
    held = [{"topic": "orders", "role": "old", "table": "legacy.orders", "exists": False},
            {"topic": "orders", "role": "new", "table": "cutover.orders", "exists": False}]
    assert _problems(readiness.absent_tables(plan, held)) == [
        "tables: tables[0].old legacy.orders does not exist in the catalog: verify compares the new table with it "
        "and promote hands it over | name the existing pipeline's table as the catalog lists it (plan check -o json: "
        "catalog.tables), or let its pipeline create it first"]
    assert readiness.absent_tables(plan, [{**held[0], "exists": True}, held[1]]) == []  # the shadow creates the new
