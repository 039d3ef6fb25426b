"""`cutover mirror --workers N`: the plan's shards as worker processes under one supervisor. Real brokers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, produce, read_all
from tests.integration.mirror_util import commit, content, first_record, position, scoped_plan, start_mirror, stop


def _records(n: int, start: int = 0) -> list[dict[str, object]]:
    return [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 4, "headers": [("h", b"%d" % i)]}
            for i in range(start, start + n)]


def _workers(pid: int) -> list[int]:
    """The supervisor's worker processes (multiprocessing's spawn children; not its resource tracker)."""
    out = []
    for child in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split():
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            out.append(int(child))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return " Z " not in stat  # a zombie has exited


def test_two_workers_copy_every_record_once_and_translate_the_group_exactly(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.orders"
    create_topic(old, topic, 4)
    produce(old, topic, _records(400))
    commit(old, f"{ns}.app", {(topic, 0): 17, (topic, 1): 40, (topic, 2): 0, (topic, 3): 99})
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)

    run = cutover("mirror", "--plan", str(scoped), "--workers", "2", "--until-caught-up", "-o", "json")
    assert run.code == 0, run.err
    summary = run.json()
    assert summary["records"] == 400 and summary["shard"] == "0-1/2"
    assert sorted(p["partition"] for p in summary["partitions"]) == [0, 1, 2, 3]
    assert {p["position"] for p in summary["partitions"]} == {100}
    assert [g["group"] for g in summary["groups"]] == [f"{ns}.app"]
    assert len(summary["groups"][0]["committed"]) == 4  # both workers' partitions in one outcome
    assert re.search(r"mirror forward, 2 workers: 400 records", run.err), run.err
    assert content(read_all(new, topic, 4)) == content(read_all(old, topic, 4))
    for p in range(4):
        on_old, on_new = first_record(old, f"{ns}.app", topic, p), first_record(new, f"{ns}.app", topic, p)
        assert on_old is not None and on_new is not None and content([on_old]) == content([on_new])
    status = cutover("mirror", "status", "--plan", str(scoped), "-o", "json")
    assert status.code == 0 and status.json()["lag"] == 0

    bad = cutover("mirror", "--plan", str(scoped), "--workers", "2", "--shard", "1/2")
    assert bad.code == 2 and "--workers 2" in bad.err and "--shard 1/2" in bad.err and "Traceback" not in bad.err


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_sigterm_stops_every_worker_after_its_transaction_and_a_rerun_resumes_exactly(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.live"
    create_topic(old, topic, 4)
    produce(old, topic, _records(200))
    scoped, port = scoped_plan(sandbox.plan_file, ns, tmp_path), free_port()
    proc = start_mirror(scoped, "--workers", "2", "--metrics-port", str(port))
    try:
        wait_for(lambda: len(_workers(proc.pid)) == 2, 60, "two worker processes")
        children = _workers(proc.pid)
        wait_for(lambda: position(scoped) >= 200, 60, "the workers to copy the records")

        def copied() -> float:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    text = r.read().decode()
            except OSError:
                return -1
            found = re.search(r'^cutover_mirror_records_total\{direction="forward"\} (\S+)$', text, re.M)
            return float(found.group(1)) if found else -1

        wait_for(lambda: copied() == 200, 60, "the one metrics endpoint to count both workers' records")
    finally:
        code, _out, err = stop(proc)
    assert code == 0, err
    assert "Traceback" not in err
    assert not [c for c in children if _alive(c)], "a worker outlived its supervisor"

    produce(old, topic, _records(100, 200))
    rerun = cutover("mirror", "--plan", str(scoped), "--workers", "2", "--until-caught-up", "-o", "json")
    assert rerun.code == 0, rerun.err
    assert rerun.json()["records"] == 100
    assert content(read_all(new, topic, 4)) == content(read_all(old, topic, 4))


@pytest.mark.slow  # a long scenario: CI runs it in a slow lane (.ci/run)
def test_a_killed_worker_stops_the_run_naming_its_shard_and_nothing_is_lost_or_doubled(
        sandbox: Sandbox, plan: Plan, tmp_path: Path, ns: str) -> None:
    old, new, topic = plan.cluster("old"), plan.cluster("new"), f"{ns}.killed"
    create_topic(old, topic, 4)
    produce(old, topic, _records(200))
    scoped = scoped_plan(sandbox.plan_file, ns, tmp_path)
    proc = start_mirror(scoped, "--workers", "2")
    try:
        wait_for(lambda: len(_workers(proc.pid)) == 2, 60, "two worker processes")
        wait_for(lambda: position(scoped) >= 200, 60, "the workers to copy the records")
        victim, other = _workers(proc.pid)
        os.kill(victim, signal.SIGKILL)
        proc.wait(90)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == 1, err
    assert re.search(rf"mirror worker [01]/2 \(pid {victim}\) was killed by signal 9", err), err
    assert "run the same command again" in err and "Traceback" not in err
    assert not _alive(other), "the other worker was left running"

    produce(old, topic, _records(40, 200))
    rerun = cutover("mirror", "--plan", str(scoped), "--workers", "2", "--until-caught-up", "-o", "json")
    assert rerun.code == 0, rerun.err
    assert rerun.json()["records"] == 40
    assert content(read_all(new, topic, 4)) == content(read_all(old, topic, 4))
