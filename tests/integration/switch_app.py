"""A stand-in client application for switch tests: one producer and one consumer-group member.

Both read the routing file for the cluster to use, and obey control files the test's
hooks write: `pause` (producer flushes, acks with `producer.paused`, waits, then
reconnects to the routed cluster) and `stop` (consumer commits, leaves the group, acks
with `consumer.stopped`, waits, then rejoins on the routed cluster). SIGTERM ends it. Logs: every
acknowledged record (produced.log) and every processed record (consumed.log), as
`cluster partition offset seq` lines. Each processed record is committed before the
next is taken, so the group's committed offset is always exactly what was processed.

Usage: python switch_app.py CLUSTERS_JSON ROUTING_FILE CONTROL_DIR TOPIC GROUP
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

from confluent_kafka import Consumer, Producer


def active(routing: Path) -> str:
    return json.loads(routing.read_text())["active"] if routing.exists() else "old"


def wait_gone(flag: Path, stop: threading.Event) -> None:
    """Until the test's hook removes the control file (or the app is told to exit)."""
    while flag.exists() and not stop.wait(0.05):
        pass


def produce(clusters: dict, routing: Path, ctl: Path, topic: str, stop: threading.Event) -> None:
    log = (ctl / "produced.log").open("a", buffering=1)
    seq = 0
    while not stop.is_set():
        side = active(routing)
        producer = Producer({**clusters[side], "enable.idempotence": True, "acks": "all", "linger.ms": 5})

        def acked(err, msg, side=side) -> None:  # type: ignore[no-untyped-def]
            assert err is None, err
            log.write(f"{side} {msg.partition()} {msg.offset()} {int(msg.key())}\n")

        while not stop.is_set() and not (ctl / "pause").exists():
            producer.produce(topic, key=str(seq).encode(), value=json.dumps({"seq": seq}).encode(),
                             on_delivery=acked)
            seq += 1
            producer.poll(0)
            stop.wait(0.01)  # about 100 records a second
        assert producer.flush(30) == 0
        (ctl / "producer.paused").touch()
        wait_gone(ctl / "pause", stop)
        (ctl / "producer.paused").unlink(missing_ok=True)


def consume(clusters: dict, routing: Path, ctl: Path, topic: str, group: str, stop: threading.Event) -> None:
    log = (ctl / "consumed.log").open("a", buffering=1)
    while not stop.is_set():
        side = active(routing)
        consumer = Consumer({**clusters[side], "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        consumer.subscribe([topic])
        while not stop.is_set() and not (ctl / "stop").exists():
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            log.write(f"{side} {msg.partition()} {msg.offset()} {json.loads(msg.value())['seq']}\n")
            consumer.commit(message=msg, asynchronous=False)
        consumer.close()
        (ctl / "consumer.stopped").touch()
        wait_gone(ctl / "stop", stop)
        (ctl / "consumer.stopped").unlink(missing_ok=True)


def main() -> None:
    clusters, routing, ctl = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), Path(sys.argv[3])
    topic, group = sys.argv[4], sys.argv[5]
    stop = threading.Event()
    threads = [threading.Thread(target=produce, args=(clusters, routing, ctl, topic, stop)),
               threading.Thread(target=consume, args=(clusters, routing, ctl, topic, group, stop))]
    signal.signal(signal.SIGTERM, lambda _s, _f: stop.set())
    for t in threads:
        t.start()
    stop.wait()  # until SIGTERM
    for t in threads:
        t.join(60)


if __name__ == "__main__":
    main()
