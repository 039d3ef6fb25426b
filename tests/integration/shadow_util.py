"""Helpers for shadow tests: a plan with table pairs, transactional traffic, and table reads."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from cutover.lake import catalog as catalog_mod
from cutover.lake import stamps, tables
from cutover.plan import Plan, derive
from cutover.shadow.job import Options, ShadowSummary, run
from tests.conftest import wait_for
from tests.integration.kafka_util import Rec

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def shadow_plan(plan_file: Path, ns: str, out: Path, pairs: list[dict[str, Any]], **spark: Any) -> Plan:
    return derive(plan_file, out / f"{ns}.yaml", merge=True, name=ns, tables=pairs,
                  spark={"trigger_interval": "1s", "checkpoint_dir": str(out / "ck"), **spark})


def shadow(plan: Plan, **opts: Any) -> ShadowSummary:
    """Run the shadow job in this process (the test session's SparkSession is reused)."""
    return run(plan, Options(**opts), threading.Event())


def start_shadow(plan: Plan, log: Path, *args: str) -> subprocess.Popen[str]:
    """The CLI in its own process group (a kill takes the Spark driver JVM with it); stderr to `log`."""
    with log.open("a") as err:
        return subprocess.Popen([sys.executable, "-m", "cutover", "shadow", "--plan", str(plan.file), *args],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=dict(os.environ),
                                start_new_session=True)


def kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the driver and its JVM, and wait until none of the group is left."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)

    def gone() -> bool:
        try:
            os.killpg(proc.pid, 0)
            return False
        except ProcessLookupError:
            return True

    wait_for(gone, 30, f"process group {proc.pid} to exit")


def produce_txn(props: dict[str, str], topic: str, txn_id: str,
                batches: list[tuple[list[dict[str, Any]], bool]]) -> None:
    """Transactions of records; each batch is (records, commit?)."""
    producer = Producer({**props, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(30)
    for records, commit in batches:
        producer.begin_transaction()
        for r in records:
            producer.produce(topic, **r)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)


def rows(plan: Plan, table: str) -> list[dict[str, Any]]:
    """Every row of an Iceberg table through pyiceberg, in partition/offset order."""
    assert plan.spec.catalog is not None
    tbl = catalog_mod.load(plan.spec.catalog).load_table(table)
    out = tbl.scan().to_arrow().to_pylist()
    return sorted(out, key=lambda r: (r["kafka_partition"], r["kafka_offset"]))


def as_rec(row: dict[str, Any], value: str = "value") -> Rec:
    """A table row in the shape kafka_util reads records in, to compare field by field."""
    headers = tuple((h["key"], h["value"]) for h in row["kafka_headers"] or ())
    millis = (row["kafka_timestamp"] - EPOCH) // dt.timedelta(milliseconds=1)
    return Rec(row["kafka_partition"], row["kafka_offset"], row["kafka_key"], row[value], headers, millis)


def stamped(plan: Plan, table: str) -> list[stamps.Snapshot]:
    snaps, current, _ = tables.snapshots(plan, table)
    return stamps.stamped(snaps, current)


def json_values(n: int, start: int = 0, **extra: Any) -> list[dict[str, Any]]:
    return [{"value": json.dumps({"id": i, "name": f"n{i}", "amount": i / 4, **extra}).encode(), "key": b"k%d" % i,
             "partition": i % 2} for i in range(start, start + n)]
