"""The production-shaped lake: a REST or PostgreSQL catalog over S3 storage, each a real
server the sandbox starts (CUTOVER_TEST_CATALOG=rest|postgres pytest -m lake).

On the default SQLite sandbox these tests are skipped: it has no catalog or storage server.
"""

from __future__ import annotations

import json
import random
import signal
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cutover.errors import UnreachableError
from cutover.lake import catalog, tables
from cutover.local.sandbox import Sandbox
from cutover.plan import load_plan
from tests.conftest import cutover, secret_values, wait_for
from tests.integration.kafka_util import create_topic, read_all
from tests.integration.mirror_util import Feed, Traffic
from tests.integration.shadow_util import as_rec, rows, shadow, shadow_plan, stamped, start_shadow

pytestmark = pytest.mark.lake


def _status(box: Sandbox) -> dict[str, dict[str, object]]:
    run = cutover("local", "status", "--dir", str(box.dir), "-o", "json")
    assert run.code == 0, run.err
    out: dict[str, dict[str, object]] = run.json()
    return out


def _local(box: Sandbox, *args: str) -> str:
    run = cutover("local", *args, "--dir", str(box.dir))
    assert run.code == 0, run.err
    return run.out.strip()


def test_the_catalog_and_storage_servers_show_in_status_stop_start_and_keep_their_data(
        servers: Sandbox, spark: Any, ns: str) -> None:
    box = servers
    status = _status(box)
    cat, storage = status["catalog"], status["storage"]
    assert cat["kind"] in ("rest", "postgres") and cat["running"] is True and isinstance(cat["pid"], int)
    assert storage["running"] is True and str(storage["endpoint"]).startswith("http://127.0.0.1:")
    assert Path(str(cat["log"])).stat().st_size > 0 and Path(str(storage["log"])).stat().st_size > 0
    # Secrets stay in secrets.env: the plan and the status name them, never show them.
    secrets = secret_values(box.dir)
    plan_text = box.plan_file.read_text()
    assert "${CUTOVER_SANDBOX_S3_SECRET_KEY}" in plan_text
    for value in secrets:
        assert value not in plan_text and value not in json.dumps(status)

    plan = load_plan(box.plan_file)
    assert plan.spec.catalog is not None
    lake = catalog.load(plan.spec.catalog)
    lake.create_namespace_if_not_exists(ns)
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", None, "c"])})
    lake.create_table(f"{ns}.kept", schema=data.schema).append(data)

    # A clean stop and start under a running Spark session: its catalog connection from before
    # is closed by the server (PostgreSQL: 57P01), and the next query reconnects.
    qualified = f"{plan.spec.catalog.name}.{ns}.kept"
    assert spark.sql(f"SELECT count(*) AS n FROM {qualified}").collect()[0].n == 3
    assert _local(box, "stop", "catalog") == "catalog: stopped"
    assert _local(box, "start", "catalog") == "catalog: running"
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {qualified}").collect()) == [1, 2, 3]

    # A crash of the catalog server: nothing answers; after a start, the table is all there.
    assert _local(box, "stop", "catalog", "--kill") == "catalog: killed"
    assert _status(box)["catalog"]["running"] is False
    with pytest.raises(UnreachableError, match=r"^catalog cutover at \S+ cannot be used: "):
        catalog.load(plan.spec.catalog).load_table(f"{ns}.kept")
    assert _local(box, "start", "catalog") == "catalog: running"
    # The catalog opened before the crash (a long-running command's) works on: no dead
    # connection from before is handed out (PostgreSQL: the pool pings before lending).
    table = lake.load_table(f"{ns}.kept")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == data.to_pylist()

    # Storage away: the table's files cannot be read. (Loaded first: a REST server loading
    # a table's metadata from storage that is down retries for about two minutes.)
    table = catalog.load(plan.spec.catalog).load_table(f"{ns}.kept")
    assert _local(box, "stop", "storage") == "storage: stopped"
    assert _status(box)["storage"]["running"] is False
    with pytest.raises(OSError, match="warehouse"):
        table.scan().to_arrow()
    assert _local(box, "start", "storage") == "storage: running"
    table = catalog.load(plan.spec.catalog).load_table(f"{ns}.kept")
    assert table.scan().to_arrow().sort_by("id").to_pylist() == data.to_pylist()


def test_a_restarted_catalog_serves_concurrent_writers(servers: Sandbox, ns: str) -> None:
    """A catalog server started over the catalog it kept (the sandbox's REST server on SQLite:
    Iceberg's JdbcCatalog leaves a read of the database open on the connection it checked its
    tables with, apache/iceberg#15462) must not refuse writes once two clients commit at once:
    a shadow, a drill's old pipeline and verify share it. Every commit lands, in order."""
    box = servers
    assert _local(box, "stop", "catalog", "--kill") == "catalog: killed"
    assert _local(box, "start", "catalog") == "catalog: running"
    plan = load_plan(box.plan_file)
    assert plan.spec.catalog is not None
    schema = pa.schema([("n", pa.int64())])
    failures: list[str] = []

    def writer(i: int) -> None:
        lake = catalog.load(plan.spec.catalog)  # type: ignore[arg-type]
        try:
            lake.create_namespace_if_not_exists(f"{ns}_{i}")
            table = lake.create_table(f"{ns}_{i}.t", schema=schema)
            for n in range(12):
                table = lake.load_table(f"{ns}_{i}.t")
                table.append(pa.table({"n": [n]}, schema=schema))
                lake.create_namespace_if_not_exists(f"{ns}_{i}_{n}")
        except Exception as exc:  # every failure is collected and shown
            failures.append(f"writer {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a writer did not finish in 300 s"
    assert failures == []
    lake = catalog.load(plan.spec.catalog)
    for i in range(4):
        table = lake.load_table(f"{ns}_{i}.t")
        assert sorted(table.scan().to_arrow()["n"].to_pylist()) == list(range(12))
        assert len(table.snapshots()) == 12
        assert [lake.namespace_exists(f"{ns}_{i}_{n}") for n in range(12)] == [True] * 12


def test_up_again_starts_only_what_is_down(servers: Sandbox) -> None:
    box = servers
    before = _status(box)
    _local(box, "stop", "storage")
    run = cutover("local", "up", "--dir", str(box.dir), "-o", "json")
    assert run.code == 0, run.err
    after = run.json()
    assert after["storage"]["running"] is True and after["storage"]["pid"] != before["storage"]["pid"]
    assert after["catalog"]["pid"] == before["catalog"]["pid"]
    assert [after[s]["pid"] for s in ("old", "new")] == [before[s]["pid"] for s in ("old", "new")]
    assert "starting the storage" in run.err and "starting the catalog" not in run.err


def test_catalog_and_storage_killed_at_random_moments_under_shadow_commits_leave_every_record_once(
        servers: Sandbox, spark: Any, tmp_path: Path, ns: str) -> None:
    """Commit outcomes that are unknown: the catalog server or the storage SIGKILLed (PostgreSQL:
    an immediate shutdown) at random moments while `shadow --follow` commits live traffic, so some
    commits die before they apply and some after they applied but before the answer came back.
    Each commit is a compare-and-set from offsets re-read after a failure: no row twice, none lost,
    and the stamps keep counting. No S3 key or database password reaches the log or Spark's
    event log."""
    box, rnd = servers, random.Random(11)
    topic, table, events = f"{ns}.stream", f"{ns}.t", tmp_path / "spark-events"
    events.mkdir()
    plan = shadow_plan(box.plan_file, ns, tmp_path, [{"topic": topic, "old": f"{ns}.o", "new": table,
                                                      "format": "raw"}], max_records_per_batch=100,
                       commit_timeout="180s",
                       conf={"spark.sql.shuffle.partitions": "4", "spark.eventLog.enabled": "true",
                             "spark.eventLog.dir": events.as_uri(), "spark.eventLog.compress": "false"})
    new = plan.cluster("new")
    create_topic(new, topic, 3)
    feed = Feed(Traffic(new, topic, 3, seed=5, txn_id=f"{ns}-feed"), records=3, pause=0.05)
    log = tmp_path / "shadow.log"
    proc = start_shadow(plan, log, "--follow")
    try:
        wait_for(lambda: tables.exists(plan, table) and len(stamped(plan, table)) > 1, 240, "the first commits")
        for part in ("catalog", "storage"):
            before = len(stamped(plan, table))
            threading.Event().wait(rnd.uniform(0.0, 3.0))  # somewhere in a batch, or its commit
            assert _local(box, "stop", part, "--kill").startswith(f"{part}: ")
            threading.Event().wait(rnd.uniform(1.0, 4.0))
            assert _local(box, "start", part) == f"{part}: running"
            wait_for(lambda b=before: len(stamped(plan, table)) > b, 240,  # type: ignore[misc]
                     f"a commit after the {part} came back")
            assert proc.poll() is None, log.read_text()[-3000:]
    finally:
        feed.finish()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=180)
    assert proc.returncode == 0, log.read_text()[-3000:]
    shadow(plan)  # whatever the last batch left, from the table's offsets
    expected = read_all(new, topic, 3)
    assert len(expected) > 300
    assert [as_rec(r) for r in rows(plan, table)] == expected
    assert "retrying" in log.read_text()
    logged = "".join(f.read_text(errors="replace") for f in events.rglob("*") if f.is_file())
    assert "SparkListenerEnvironmentUpdate" in logged and "s3.secret-access-key" in logged
    for value in secret_values(box.dir):
        assert value not in logged and value not in log.read_text()
