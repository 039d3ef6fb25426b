"""cutover shadow under faults: the Spark driver killed at random moments, the catalog gone
during a commit. Every record of the topic ends up in the table exactly once."""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cutover.errors import Refused
from cutover.lake import catalog, maintenance, tables
from cutover.local.sandbox import Sandbox
from tests.conftest import wait_for
from tests.integration.kafka_util import create_topic, read_all
from tests.integration.mirror_util import Feed, Traffic
from tests.integration.shadow_util import (
    as_rec,
    kill_group,
    produce_txn,
    rows,
    shadow,
    shadow_plan,
    stamped,
    start_shadow,
)

pytestmark = pytest.mark.usefixtures("spark")


@pytest.mark.slow
def test_driver_killed_at_random_moments_leaves_every_record_once(sandbox: Sandbox, tmp_path: Path,
                                                                   ns: str) -> None:
    topic, rnd = f"{ns}.stream", random.Random(7)
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.o", "new": f"{ns}.t",
                                                          "format": "raw"}], max_records_per_batch=150)
    new = plan.cluster("new")
    create_topic(new, topic, 3)
    feed = Feed(Traffic(new, topic, 3, seed=3, txn_id=f"{ns}-feed"), records=3, pause=0.1)
    log = tmp_path / "shadow.log"
    commits = []
    try:
        for _ in range(3):
            proc = start_shadow(plan, log, "--follow")
            before = len(stamped(plan, f"{ns}.t"))
            # Kill once the run has committed at least once, at a random moment after that. A
            # driver's first commit includes starting Spark: minutes on a loaded 2-core machine.
            wait_for(lambda b=before: len(stamped(plan, f"{ns}.t")) > b, 240, "a commit by this run")  # type: ignore[misc]
            threading.Event().wait(rnd.uniform(0.2, 4.0))
            kill_group(proc)
            commits.append(len(stamped(plan, f"{ns}.t")))
    finally:
        feed.finish()
    assert commits == sorted(commits) and commits[0] > 0
    shadow(plan)  # catch up in this process, from the table's offsets
    expected = read_all(new, topic, 3)
    assert len(expected) > 200
    assert [as_rec(r) for r in rows(plan, f"{ns}.t")] == expected


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
def test_catalog_outage_during_commits_is_retried_and_loses_or_doubles_nothing(
        sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    topic = f"{ns}.outage"
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.o", "new": f"{ns}.t",
                                                          "format": "raw"}])
    new = plan.cluster("new")
    create_topic(new, topic, 3)
    batch = [{"value": b"a%d" % i, "partition": i % 3} for i in range(30)]
    produce_txn(new, topic, f"{ns}-tx", [(batch, True)])
    log = tmp_path / "shadow.log"
    proc = start_shadow(plan, log, "--follow")
    try:
        wait_for(lambda: tables.exists(plan, f"{ns}.t") and len(rows(plan, f"{ns}.t")) == 30, 240,
                 "the first 30 rows")
        # SQLite: its write lock held; readers still get in, writers do not: the table's offsets
        # are read, its commit fails. REST or PostgreSQL: the catalog's server stopped.
        sandbox.take_catalog()
        try:
            produce_txn(new, topic, f"{ns}-tx", [([{"value": b"b%d" % i, "partition": i % 3} for i in range(30)],
                                                  True)])
            wait_for(lambda: "retrying" in log.read_text(), 90, "the shadow to retry its commit")
        finally:
            sandbox.give_catalog()
        wait_for(lambda: len(rows(plan, f"{ns}.t")) == 60, 90, "all 60 rows after the outage")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 0, log.read_text()[-2000:]
    text = log.read_text()
    # between triggers nothing is in flight; during a batch it is finished first: either way said as it is
    assert "SIGTERM: finishing the batch in flight, then stopping" in text or \
        "SIGTERM: stopping (nothing in flight to finish)" in text, text[-2000:]
    retries = [line for line in text.splitlines() if "retrying" in line]
    assert retries and all("committing to table" in r for r in retries), retries
    if sandbox.status()["catalog"]["kind"] == "sqlite":  # readers got in: only the commit failed
        assert not any("could not load" in r for r in retries), retries
    assert [as_rec(r) for r in rows(plan, f"{ns}.t")] == read_all(new, topic, 3)


@pytest.mark.slow  # about a minute: in the slow suite, which CI also runs
def test_two_runs_on_one_table_never_double_a_record(sandbox: Sandbox, tmp_path: Path, ns: str) -> None:
    """An operator's mistake: two `shadow --follow` on the same table. Each commit is a
    compare-and-set on the snapshot its offsets came from, so the loser re-filters."""
    topic = f"{ns}.twice"
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.o", "new": f"{ns}.t",
                                                          "format": "raw"}], max_records_per_batch=100)
    new = plan.cluster("new")
    create_topic(new, topic, 3)
    shadow(plan)  # creates the table, so both runs start on an existing one
    feed = Feed(Traffic(new, topic, 3, seed=5, txn_id=f"{ns}-feed"), records=3, pause=0.1)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [start_shadow(plan, log, "--follow") for log in logs]
    try:
        # Both read the same snapshot and race to publish: the loser's compare-and-set fails.
        wait_for(lambda: any("another writer committed" in log.read_text() for log in logs), 120,
                 "a lost compare-and-set")
        after = len(stamped(plan, f"{ns}.t"))  # and both go on committing after it
        wait_for(lambda: len(stamped(plan, f"{ns}.t")) >= after + 2, 120, "more commits after the conflict")
    finally:
        feed.finish()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.communicate(timeout=60)
    assert [p.returncode for p in procs] == [0, 0], [log.read_text()[-1500:] for log in logs]
    shadow(plan)
    expected = read_all(new, topic, 3)
    assert len(expected) > 100
    assert [as_rec(r) for r in rows(plan, f"{ns}.t")] == expected
    runs = {s.summary["cutover.run-id"] for s in stamped(plan, f"{ns}.t")}
    assert len(runs) >= 2


def _maintain(spark: Any, plan: Any, table: str) -> None:
    """Table maintenance cutover did not do: compact every file, expire all but the newest snapshot,
    remove orphan files (cutover.lake.maintenance, as the drills' table.maintain step)."""
    maintenance.maintain(spark, plan, table, maintenance.MIN_ORPHAN_AGE)


def _plant_orphan(sandbox: Sandbox, plan: Any, table: str) -> tuple[str, Path]:
    """A file in the table's data folder that no snapshot names, two days old: (its location, its path
    on this machine, in the warehouse folder or the S3 storage's folder)."""
    location = catalog.load(plan.spec.catalog).load_table(table).location().rstrip("/") + "/data/planted-orphan.parquet"
    if location.startswith("s3://"):
        path = sandbox.dir / "storage" / "data" / location.removeprefix("s3://")
    else:
        path = Path(location.removeprefix("file:"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not named by any snapshot")
    old = time.time() - 2 * 86400
    os.utime(path, (old, old))
    return location, path


@pytest.mark.slow  # CI runs it in its slow lane; the default suite stays under 15 minutes
@pytest.mark.lake(only="rest")
def test_positions_survive_compaction_and_snapshot_expiry(sandbox: Sandbox, spark: Any, tmp_path: Path,
                                                           ns: str) -> None:
    """Maintenance cutover did not do leaves a head whose ancestry has no stamped snapshot (a running
    shadow's own branch keeps its last one alive; between runs nothing does): the next run continues
    every partition exactly, and every commit carries every partition's position."""
    topic, table = f"{ns}.kept", f"{ns}.t"
    plan = shadow_plan(sandbox.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.o", "new": table,
                                                          "format": "raw"}])
    new = plan.cluster("new")
    create_topic(new, topic, 3)
    produce_txn(new, topic, f"{ns}-tx", [([{"value": b"a%d" % i, "partition": i % 3} for i in range(30)], True)])
    shadow(plan)
    location, planted = _plant_orphan(sandbox, plan, table)
    done = maintenance.maintain(spark, plan, table, maintenance.MIN_ORPHAN_AGE)
    assert done["rewritten_data_files"] >= 2 and done["added_data_files"] >= 1
    assert [loc.replace("file:///", "file:/") for loc in done["orphan_files_removed"]] == [
        location.replace("file:///", "file:/")]
    # Gone, on local files and on S3 (a multi-object delete, DeleteObjects, with the checksum
    # the AWS SDK must send: s3proxy 2.6.0 answered it 501 and Iceberg only logged that).
    assert not planted.exists()
    assert not stamped(plan, table) and len(rows(plan, table)) == 30
    produce_txn(new, topic, f"{ns}-tx", [([{"value": b"b%d" % i, "partition": 0} for i in range(5)], True)])
    shadow(plan)  # one partition has news; the other two must not start over
    assert [as_rec(r) for r in rows(plan, table)] == read_all(new, topic, 3)
    newest = stamped(plan, table)[-1]
    assert json.loads(newest.summary["cutover.kafka.positions"]) == {"0": 16, "1": 10, "2": 10}  # markers count

    _maintain(spark, plan, table)
    produce_txn(new, topic, f"{ns}-tx", [([{"value": b"c%d" % i, "partition": i % 3} for i in range(9)], True)])
    shadow(plan)
    assert [as_rec(r) for r in rows(plan, table)] == read_all(new, topic, 3)

    # Where neither a stamp nor the table's own record of its positions is left, it refuses to guess.
    spark.sql(f"ALTER TABLE {tables.qualified(plan, table)} UNSET TBLPROPERTIES ('cutover.kafka.state')")
    _maintain(spark, plan, table)
    with pytest.raises(Refused, match="has rows but no cutover offsets"):
        shadow(plan)
