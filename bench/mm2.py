"""MirrorMaker 2 (dedicated mode, old -> new) as the baseline the bench compares the mirror against.

One run: write mm2.properties, start MM2, time until the first record lands on the target and
until the target's end offsets reach the source's, then wait until MM2 has synced every group's
committed offsets to the target (and they have held still for a few seconds), then stop it.
The source must not be written during a run, and the target must hold no state of an earlier
MM2 run (its mm2-* topics): MM2 would resume from there.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from cutover import jvm

MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
POLL_SECONDS = 0.25
STABLE_SECONDS = 3.0
#: How long the synced group offsets, not yet complete, stand still before MM2 is taken to have
#: translated all it will (it left a group partition untranslated in one run at 100 B, 8 groups).
GIVE_UP_SECONDS = 30.0
STOP_SECONDS = 30.0

Offsets = dict[tuple[str, int], int]


@dataclass
class MM2Result:
    #: From process start until target end offsets == source end offsets for all topic partitions.
    seconds_to_caught_up: float
    #: From process start until the first record appears on the target.
    startup_seconds: float
    #: group -> (topic, partition) -> committed offset on the target, after sync.
    groups_synced: dict[str, Offsets]


def mm2_properties(old_bootstrap: str, new_bootstrap: str, topics: list[str], groups: list[str],
                   tasks: int = 1) -> str:
    """The mm2.properties of one old -> new flow: identity topic names, fast group sync, RF 1 everywhere,
    `tasks` source tasks (tasks.max)."""
    props = {
        "tasks.max": str(tasks),
        "clusters": "old, new",
        "old.bootstrap.servers": old_bootstrap,
        "new.bootstrap.servers": new_bootstrap,
        "old->new.enabled": "true",
        "new->old.enabled": "false",
        # Else a new->old herder runs anyway, for heartbeats, and creates mm2-* topics on old.
        "new->old.emit.heartbeats.enabled": "false",
        "old->new.topics": _alternation(topics),
        "old->new.groups": _alternation(groups),
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        # Keep the offset-syncs topic on the target too: MM2 then writes nothing to old.
        "offset-syncs.topic.location": "target",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "sync.topic.acls.enabled": "false",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
    }
    # Java .properties treat a backslash as an escape: double those of the regexes.
    return "".join(f"{k} = {v.replace(chr(92), chr(92) * 2)}\n" for k, v in props.items())


def run_mirror_maker(old_bootstrap: str, new_bootstrap: str, topics: list[str], groups: list[str], workdir: Path,
                     timeout: float = 600, tasks: int = 1) -> MM2Result:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "mm2.properties"
    config.write_text(mm2_properties(old_bootstrap, new_bootstrap, topics, groups, tasks))
    cmd = [jvm.java(), "-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
           "-Dorg.slf4j.simpleLogger.showDateTime=true",
           "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.common.config.AbstractConfig=warn",
           "-cp", ":".join(str(j) for j in jvm.resolve(jvm.MIRROR_MAKER)), MAIN_CLASS, str(config)]
    log_file = workdir / "mm2.log"
    old, new = _Cluster(old_bootstrap), _Cluster(new_bootstrap)
    try:
        partitions = old.partitions(topics)
        source_ends = old.ends(partitions)
        source_groups = {g: old.committed(g, topics) for g in groups}
        synced: dict[str, Offsets] = {}
        stable_since = 0.0

        def caught_up() -> bool:
            ends = new.ends(partitions)
            return all(ends[tp] >= end for tp, end in source_ends.items())

        def groups_stable() -> bool:
            nonlocal synced, stable_since
            now = {g: new.committed(g, topics) for g in groups}
            if now != synced:
                synced, stable_since = now, time.monotonic()
            complete = all(now[g].keys() >= source_groups[g].keys() for g in groups)
            # Done when every group is on the target and stands still, or when what it synced stands still
            # for GIVE_UP_SECONDS (it syncs every second here): what it never translated counts as such.
            still = time.monotonic() - stable_since
            return still >= STABLE_SECONDS if complete else still >= GIVE_UP_SECONDS

        with open(log_file, "wb") as log:
            start = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workdir,
                                    start_new_session=True)
        try:
            waiter = _Waiter(proc, start + timeout, log_file)
            first = waiter.until(lambda: any(new.ends(partitions).values()), "the first record on the target")
            caught = waiter.until(caught_up, "the target to reach the source's end offsets")
            waiter.until(groups_stable, "the group offsets to be synced to the target")
            return MM2Result(seconds_to_caught_up=caught - start, startup_seconds=first - start, groups_synced=synced)
        finally:
            _stop(proc)
    finally:
        old.close()
        new.close()


def _alternation(names: list[str]) -> str:
    return "|".join(re.escape(n) for n in names)


class _Cluster:
    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cutover-bench-probe",
                                  "enable.auto.commit": False})

    def close(self) -> None:
        self.consumer.close()

    def partitions(self, topics: list[str]) -> list[tuple[str, int]]:
        meta = self.admin.list_topics(timeout=15)
        return [(t, p) for t in topics for p in sorted(meta.topics[t].partitions)]

    def ends(self, partitions: list[tuple[str, int]]) -> Offsets:
        """High watermarks; 0 for a partition that does not exist (yet)."""
        out: Offsets = {}
        for t, p in partitions:
            try:
                out[(t, p)] = self.consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
            except KafkaException:
                out[(t, p)] = 0
        return out

    def committed(self, group: str, topics: list[str]) -> Offsets:
        """The group's committed offsets on the given topics; empty if it has none."""
        try:
            fut = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
            tps = fut.result(timeout=15).topic_partitions or []
        except KafkaException:
            return {}
        return {(tp.topic, tp.partition): tp.offset for tp in tps if tp.topic in topics and tp.offset >= 0}


@dataclass
class _Waiter:
    proc: subprocess.Popen[bytes]
    deadline: float
    log: Path

    def until(self, done: Callable[[], bool], what: str) -> float:
        """Poll until done(); the monotonic time it first held. Fails if MM2 exits or time runs out."""
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"MirrorMaker exited (code {self.proc.returncode}) while waiting for {what}; "
                                   f"see {self.log}")
            if done():
                return time.monotonic()
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"timed out waiting for {what}; see {self.log}")
            time.sleep(POLL_SECONDS)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (MM2 shuts its herders down cleanly), SIGKILL if it is still running after STOP_SECONDS."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
