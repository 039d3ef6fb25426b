"""`cutover exporter` against the sandbox: the switch's phase, the probes of the catalog and the storage, the
mirror's state and group syncs, served over HTTP from its snapshots; a port in use named; SIGTERM ends it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from cutover.errors import ExitCode
from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce
from tests.integration.metrics_util import Series, scrape, value
from tests.integration.mirror_util import commit, scoped_plan


def _served(port: int) -> Series | None:
    try:
        found = scrape(port)
    except OSError:
        return None
    return found if "cutover_switch_phase" in found and "cutover_catalog_up" in found else None


def test_the_exporter_serves_the_switch_the_lake_and_the_mirror_state(sandbox: Sandbox, plan: Plan, ns: str,
                                                                        tmp_path: Path) -> None:
    old, topic, group = plan.cluster("old"), f"{ns}.orders", f"{ns}.billing"
    create_topic(old, topic, 2)
    produce(old, topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(10)])
    commit(old, group, {(topic, 0): 5, (topic, 1): 5})
    plan_file = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    port, began = free_port(), time.time()
    proc = subprocess.Popen([sys.executable, "-m", "cutover", "exporter", "--plan", str(plan_file), "--port", str(port),
                             "--interval", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        served = wait_for(lambda: _served(port), 60, "the exporter's first snapshot")
        phases = {labels["phase"]: v for labels, v in served["cutover_switch_phase"]}
        assert phases["ready"] == 1 and sum(phases.values()) == 1  # no promote yet
        assert value(served, "cutover_switch_running") == 0
        assert value(served, "cutover_catalog_up") == 1 and value(served, "cutover_storage_up") == 1
        assert value(served, "cutover_mirror_state_lag_records", direction="forward") == 0
        assert value(served, "cutover_mirror_gaps", direction="forward") == 0
        assert began - 60 <= value(served, "cutover_group_synced_timestamp_seconds", direction="forward",
                                   group=group) <= time.time()
        assert value(served, "cutover_reverse_mirror_running") == 0
        # no promote, no reverse mirror: no reverse series (a lag of every record on new would be false)
        assert [labels for name in ("cutover_mirror_state_lag_records", "cutover_mirror_gaps",
                                    "cutover_group_synced_timestamp_seconds")
                for labels, _v in served.get(name, []) if labels["direction"] == "reverse"] == []
        assert value(served, "cutover_exporter_errors", part="switch") == 0
        first = value(served, "cutover_exporter_snapshot_timestamp_seconds")
        wait_for(lambda: value(scrape(port), "cutover_exporter_snapshot_timestamp_seconds") > first, 30,
                 "a second snapshot")

        # a port in use: named by the command's own option, its own exit code, nothing served
        taken = cutover("exporter", "--plan", str(plan_file), "--port", str(port))
        assert taken.code == ExitCode.USAGE, taken.err
        assert f"--port {port}: cannot serve metrics on 127.0.0.1:{port}: Address already in use" in taken.err
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_status_watch_shows_each_part_live_until_stopped(sandbox: Sandbox, plan: Plan, ns: str,
                                                          tmp_path: Path) -> None:
    """Not a terminal (a pipe): one frame a reading, each part on its line; SIGTERM ends it with exit 0."""
    old, topic = plan.cluster("old"), f"{ns}.orders"
    create_topic(old, topic, 1)
    produce(old, topic, [{"value": b"x"} for _ in range(5)])
    plan_file = scoped_plan(sandbox.plan_file, ns, tmp_path)
    assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
    log = tmp_path / "watch.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cutover", "status", "--plan", str(plan_file), "--watch",
                                 "--interval", "1", "--timeout", "5"], stdout=out, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: log.read_text().count("cutover status at") >= 2, 60, "two frames")
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
    frame = log.read_text().split("cutover status at")[1]
    parts = [line.split()[0:2] for line in frame.splitlines()[1:] if line.strip()]
    assert ["switch", "ready"] in parts and ["mirror", "forward"] in parts, frame
    assert "lag 0 records, 0/1 partitions behind" in frame
    refused = cutover("status", "--plan", str(plan_file), "--watch", "-o", "json")
    assert refused.code == ExitCode.USAGE and "--watch shows the status live" in refused.err
