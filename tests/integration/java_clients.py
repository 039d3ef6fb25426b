"""Apache Kafka's own system-test clients as the application through a switch.

`org.apache.kafka.tools.VerifiableProducer` and `VerifiableConsumer` (the kafka-tools jar from
Maven Central, nothing written here) print one JSON event per acknowledged send and per
consumed record. Each runs as a JVM on the routed cluster, with cutover's translation of the
plan's librdkafka properties into Java ones, and obeys the control files of
`cutover.drill.traffic` that the switch's hooks write: on `pause` the producer is stopped
(SIGTERM: it flushes and reports every acknowledgement) and acknowledges with
`producer.paused`; on `stop` the consumer is stopped (it commits what it reported, then leaves
the group) and acknowledges with `consumer.stopped`. When the hold lifts, a new JVM starts on
whichever cluster the routing file names. Every event is kept with the cluster it came from.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from cutover import jvm
from cutover.drill.context import control_hooks
from cutover.drill.traffic import _Worker
from cutover.kafka.java_client import java_properties
from cutover.local.sandbox import Sandbox
from cutover.plan import Plan, derive
from cutover.switch import background, routing
from tests.conftest import cutover, wait_for
from tests.integration.kafka_util import create_topic, read_all

#: What a send refused after SIGTERM closed the producer reports: it never left the JVM.
CLOSED = "Cannot perform operation after producer has been closed"


@dataclass(frozen=True)
class Event:
    cluster: str
    run: int  # 1 for the first JVM, 2 for the one started after the first hold, ...
    body: dict[str, Any]


@dataclass
class _JavaClient(_Worker):
    tool: ClassVar[str]
    flag: ClassVar[str]
    ack: ClassVar[str]
    plan: Plan
    ctl: Path
    topic: str
    work: Path
    events: list[Event] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._proc: subprocess.Popen[str] | None = None

    def stop(self) -> None:
        """Stop for good: the running JVM is asked to stop (SIGTERM), then killed after 90 s."""
        self._stop.set()
        super().stop()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(30)

    def _args(self, run: int) -> list[str]:
        raise NotImplementedError

    def named(self, name: str, cluster: str | None = None) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.body.get("name") == name and cluster in (None, e.cluster)]

    def _run(self) -> None:
        classpath = ":".join(str(j) for j in jvm.resolve(jvm.KAFKA_TOOLS))
        run = 0
        while not self._stop.is_set():
            run += 1
            side = routing.active(self.plan)
            props = java_properties(side, self.plan.cluster(side))
            config = self.work / f"{self.role}-{run}.properties"
            config.touch(0o600)
            config.write_text(jvm.properties_text(props))
            log = self.work / f"{self.role}-{run}.log"
            with log.open("w") as err:
                proc = subprocess.Popen(
                    [jvm.java(), "-cp", classpath, f"org.apache.kafka.tools.{self.tool}", "--topic", self.topic,
                     "--bootstrap-server", props["bootstrap.servers"], f"--{self.role}.config", str(config),
                     *self._args(run)], stdout=subprocess.PIPE, stderr=err, text=True)
                self._proc = proc
                reader = threading.Thread(target=self._read, args=(proc, side, run), daemon=True)
                reader.start()
                while proc.poll() is None and not self._stop.is_set() and not (self.ctl / self.flag).exists():
                    self._stop.wait(0.05)
                if proc.poll() is not None:
                    self.errors.append(f"{self.tool} on {side} exited by itself ({proc.returncode}); see {log}")
                proc.terminate()  # the JVM's shutdown hook flushes (producer) or commits and leaves (consumer)
                try:
                    proc.wait(90)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(30)
                    self.errors.append(f"{self.tool} on {side} did not stop within 90 s; see {log}")
                reader.join(30)
            config.unlink()
            self._held(self.flag, self.ack)

    def _read(self, proc: subprocess.Popen[str], side: str, run: int) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):  # the tools also print a deprecation notice
                with self._lock:
                    self.events.append(Event(side, run, json.loads(line)))


@dataclass
class JavaProducer(_JavaClient):
    """VerifiableProducer: values `RUN.N` (N counts from 0 in each JVM), keys cycling over ten."""

    role: ClassVar[str] = "producer"
    tool: ClassVar[str] = "VerifiableProducer"
    flag: ClassVar[str] = "pause"
    ack: ClassVar[str] = "producer.paused"
    throughput: int = 100

    def _args(self, run: int) -> list[str]:
        return ["--throughput", str(self.throughput), "--value-prefix", str(run), "--repeating-keys", "10"]

    def acked(self, cluster: str | None = None) -> list[str]:
        return [e.body["value"] for e in self.named("producer_send_success", cluster)]


@dataclass
class JavaConsumer(_JavaClient):
    """VerifiableConsumer in a group, committing synchronously after each batch, every record reported."""

    role: ClassVar[str] = "consumer"
    tool: ClassVar[str] = "VerifiableConsumer"
    flag: ClassVar[str] = "stop"
    ack: ClassVar[str] = "consumer.stopped"
    group: str = ""

    def _args(self, run: int) -> list[str]:
        return ["--group-id", self.group, "--verbose", "--reset-policy", "earliest"]

    def consumed(self, cluster: str | None = None) -> list[str]:
        return [e.body["value"] for e in self.named("record_data", cluster)]


def promote_and_roll_back(box: Sandbox, tmp: Path, ns: str) -> None:
    """Kafka's own clients write and read one topic through `promote` then `rollback`, the switch
    driving them by its hooks and the routing file, a mirror following in the background until
    the promote. From their events alone: every acknowledged message is on the active (old)
    cluster exactly once, and the group read each exactly once across both switches."""
    ctl = tmp / "ctl"
    ctl.mkdir()
    plan = derive(
        box.plan_file, tmp / f"{ns}.yaml", merge=True, name=ns,
        topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]}, mirror={"group_sync_interval": "1s"},
        switch={"journal_dir": str(tmp / "journal"), "quiet_timeout": "60s", "groups_timeout": "60s",
                "hook_timeout": "120s"},
        routing={"file": str(tmp / "routing.json")}, hooks=control_hooks(tmp / "hooks", ctl), tables=[])
    topic, old = f"{ns}.payments", plan.cluster("old")
    create_topic(old, topic, 3)
    producer = JavaProducer(plan, ctl, topic, tmp)
    consumer = JavaConsumer(plan, ctl, topic, tmp, group=f"{ns}.ledger")
    producer.start()
    consumer.start()
    with (tmp / "mirror.err").open("w") as err:
        mirror = subprocess.Popen([sys.executable, "-m", "cutover", "mirror", "--plan", str(plan.file)],
                                  stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for(lambda: len(consumer.consumed("old")) >= 200, 180, "the Java consumer to read on the old cluster")
        # Within the promote's lag gate (gates.max_mirror_lag, 1,000 a partition): the drain copies the rest. Not
        # closer: the producer keeps writing 100 a second, and on a loaded machine (a CI run with two more
        # suites beside this one) the mirror's cycle kept it 400 to 700 behind, never under 200, for 120 s.
        gate = plan.spec.gates.max_mirror_lag
        wait_for(lambda: cutover("mirror", "status", "--plan", str(plan.file), "-o", "json").json()["lag"] < gate,
                 120, f"the mirror to come within the promote's lag gate (its log: {tmp / 'mirror.err'})")
        promoted = cutover("promote", "--plan", str(plan.file), "--execute", "-o", "json", timeout=600)
        assert promoted.code == 0, promoted.err
        mirror.terminate()  # fenced by the drain; the reverse mirror runs in the background now
        mirror.wait(120)
        wait_for(lambda: len(consumer.consumed("new")) >= 200, 180, "the Java clients to go on on the new cluster")
        rolled = cutover("rollback", "--plan", str(plan.file), "--execute", "-o", "json", timeout=600)
        assert rolled.code == 0, rolled.err
        assert rolled.json()["carried_back"] == len(producer.acked("new")) > 0
        wait_for(lambda: sum(v.startswith("3.") for v in consumer.consumed("old")) >= 200, 180,
                 "the Java clients to go on on the old cluster again")
        (ctl / "pause").touch()
        wait_for(lambda: (ctl / "producer.paused").exists(), 120, "the Java producer to stop")
        wait_for(lambda: len(consumer.consumed()) >= len(producer.acked()), 120,
                 "the Java consumer to read everything acknowledged")
    finally:
        producer.stop()
        consumer.stop()
        if mirror.poll() is None:
            mirror.kill()
        background.stop(plan)

    assert not producer.errors and not consumer.errors, (producer.errors, consumer.errors)
    runs = {e.run: e.cluster for e in producer.named("startup_complete")}
    assert runs == {1: "old", 2: "new", 3: "old"}, runs  # one JVM per side, moved by the switch's hooks
    refused = [e.body for e in producer.named("producer_send_error")]
    assert all(CLOSED in str(b.get("message")) for b in refused), refused  # only sends after SIGTERM closed it
    acked = Counter(producer.acked())
    assert len(acked) == sum(acked.values()) > 600  # each value is acknowledged once
    on_old = Counter(r.value.decode() for r in read_all(old, topic, 3, timeout=60))
    assert on_old == acked, "the active cluster holds every acknowledged message exactly once"
    assert Counter(consumer.consumed()) == acked, "the group read each message once: none re-read, none skipped"
    commits = consumer.named("offsets_committed")
    assert commits and all(c.body["success"] for c in commits), [c.body for c in commits if not c.body["success"]]
