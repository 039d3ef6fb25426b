"""A real Kafka Connect worker with Kafka's FileStreamSource connector, moved to the new cluster by promote
and back by rollback: its config, offsets and status topics mirrored, the connector's offsets checked in both
clusters' offsets topics and then on the new worker through KIP-875, and the file read on from exactly where
it stopped (every line once, none again)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from cutover import jvm
from cutover.errors import UnreachableError
from cutover.kafka.connect import Connect, ConnectError
from cutover.kafka.java_client import java_properties
from cutover.local import connect
from cutover.local.sandbox import Sandbox, free_port
from cutover.plan import Plan
from tests.conftest import cutover, wait_for
from tests.integration.app_process import reader_plan
from tests.integration.kafka_util import create_topic, read_all

pytestmark = pytest.mark.slow  # three starts of a Connect worker, a promote and a rollback

#: Kafka's Connect runtime with its FileStreamSource: a worker that starts quicker than the sandbox's.
CONNECT_FILE = jvm.JarSet("connect-file", (*(f"org.apache.kafka:{a}:{jvm.KAFKA_VERSION}" for a in (
    "connect-runtime", "connect-json", "connect-file")), "org.slf4j:slf4j-simple:1.7.36"))
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def _lines(path: Path, phase: str, n: int) -> list[str]:
    lines = [f"{phase}-{i}" for i in range(n)]
    with path.open("a") as f:
        f.write("".join(f"{line}\n" for line in lines))
    return lines


def _values(props: dict[str, str], topic: str) -> list[str]:
    return [r.value.decode() for r in read_all(props, topic)]


def test_a_source_connector_resumes_on_the_new_worker_at_its_offsets(
        sandbox: Sandbox, plan: Plan, ns: str, tmp_path: Path) -> None:
    old, new = plan.cluster("old"), plan.cluster("new")
    data, internal = f"{ns}.lines", (f"{ns}.connect-configs", f"{ns}.connect-offsets", f"{ns}.connect-status")
    create_topic(old, data, 1)
    urls = {}
    for side in ("old", "new"):  # one worker per cluster, the same group and topics: the Connect cluster moved
        spec = connect.ConnectSpec(tmp_path / f"worker-{side}", free_port(), side, group=f"{ns}.connect",
                                   topics=internal)
        cmd = connect.command(spec, java_properties(side, plan.cluster(side)), plugins=(CONNECT_FILE,))
        (tmp_path / f"worker-{side}.sh").write_text("exec " + shlex.join(cmd) + "\n")
        urls[side] = spec.url
    run = f'"{tmp_path}/worker-$1.pid"'
    start = (f'nohup sh "{tmp_path}/worker-$1.sh" > "{tmp_path}/worker-$1.log" 2>&1 < /dev/null &\n'
             f'echo $! > {run}\n')
    stop = (f'[ -f {run} ] || exit 0\npid=$(cat {run}); rm {run}\nkill "$pid" 2>/dev/null || exit 0\n'
            'while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done\n')
    (tmp_path / "start-worker").write_text(start)
    (tmp_path / "stop-worker").write_text(stop)
    log = tmp_path / "hooks.log"
    plan_file = reader_plan(
        sandbox.plan_file, tmp_path, ns,
        {"name": "files", "kind": "connect", "old_url": urls["old"], "new_url": urls["new"],
         "connectors": [f"{ns}-file"], "offsets_topic": internal[1]},
        # the source connector writes data: its worker stops with the producers, before the drain
        freeze_producers=f'sh "{tmp_path}/stop-worker" "$CUTOVER_CLUSTER"\n',
        start_reader=f'echo "start $CUTOVER_ACTIVE $CUTOVER_READER" >> "{log}"\n'
                     f'sh "{tmp_path}/start-worker" "$CUTOVER_ACTIVE"\n')
    source = tmp_path / "source.txt"
    sent = _lines(source, "1", 30)
    try:
        subprocess.run(["sh", str(tmp_path / "start-worker"), "old"], check=True)  # what the hook runs
        worker = Connect(urls["old"])
        wait_for(lambda: _up(worker), 120, "the old worker's REST listener", interval=0.5)
        worker.put(f"{ns}-file", {"connector.class": SOURCE, "tasks.max": "1", "file": str(source), "topic": data,
                                  "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                                  "value.converter": "org.apache.kafka.connect.storage.StringConverter"})
        size = source.stat().st_size
        wait_for(lambda: _values(old, data) == sent and worker.offsets(f"{ns}-file") == [
            {"partition": {"filename": str(source)}, "offset": {"position": size}}], 120,
            "the connector to copy the file and commit its position", interval=0.5)

        # The connector still runs on old: refused, nothing recorded.
        refused = cutover("readers", "translate", "--plan", str(plan_file), "--reader", "files", "--execute")
        assert refused.code == 3 and f"{ns}-file still run on the old worker" in refused.err, refused.err
        assert "Traceback" not in refused.err and not (tmp_path / "journal" / ns / "readers.jsonl").exists()

        assert cutover("mirror", "--plan", str(plan_file), "--until-caught-up").code == 0
        promoted = cutover("promote", "--plan", str(plan_file), "--execute", "-o", "json", timeout=600)
        assert promoted.code == 0, promoted.err
        steps = {s["name"]: s for s in promoted.json()["steps"]}
        assert steps["start-reader:files"]["detail"]["resumed"]["checked"] is True, steps["start-reader:files"]
        moved = json.loads((tmp_path / "journal" / ns / "readers.jsonl").read_text().splitlines()[-1])
        assert moved["offsets"] == {f"{ns}-file": {json.dumps({"filename": str(source)}, separators=(",", ":")):
                                                   json.dumps({"position": size}, separators=(",", ":"))}}
        later = _lines(source, "2", 10)
        wait_for(lambda: _values(new, data) == sent + later, 120, "the new worker to copy the new lines",
                 interval=0.5)  # exactly the lines after its position: none again, none skipped

        rolled = cutover("rollback", "--plan", str(plan_file), "--execute", "-o", "json", timeout=600)
        assert rolled.code == 0, rolled.err
        last = _lines(source, "3", 5)
        wait_for(lambda: _values(old, data) == sent + later + last, 120, "the old worker to go on after rollback",
                 interval=0.5)
        assert log.read_text().splitlines() == ["stop old files", "start new files", "stop new files",
                                                "start old files"]
        status = cutover("status", "--plan", str(plan_file))
        assert f"reader files: on the old cluster, worker {urls['old']}: {ns}-file" in status.out, status.out
    finally:
        for side in ("old", "new"):
            pid = tmp_path / f"worker-{side}.pid"
            if pid.exists():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid.read_text()), signal.SIGKILL)


def _up(worker: Connect) -> bool:
    try:
        worker.connectors()
        return True
    except (UnreachableError, ConnectError):  # not listening yet, or its REST resources not registered yet
        return False
