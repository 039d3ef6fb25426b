"""The real probe behind `capabilities.probe`: what a cluster does with records, in a scratch topic.

Two records with a timestamp and a header are written idempotently and read back; then, when the
API list has transactions, one transaction is committed and one aborted, and the topic is read with
read_committed and with read_uncommitted. The scratch topic is deleted after, whatever happened.
Each answer is (supported, evidence); None where the probe could not tell (it says why).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cutover.kafka.clients import ClusterRef

Answers = dict[str, tuple[bool | None, str]]

#: The timestamp the probe's records are given (2020-09-13T12:26:40Z): no broker would stamp it itself.
STAMP = 1_600_000_000_000


def run(props: Mapping[str, str], topic: str, timeout: float, transactions: bool) -> tuple[Answers, dict[str, Any]]:
    """Every answer the scratch topic gives, and what else it showed (where transaction markers sit); the
    topic deleted after."""
    admin = AdminClient(_quiet(props))
    try:
        _create(admin, topic, timeout)
    except (KafkaException, RuntimeError) as exc:
        why = f"the scratch topic {topic} could not be created: {_text(exc)}"
        return {name: (None, why) for name in ("timestamps", "headers", "transactions", "read-committed")}, {}
    try:
        answers, facts = _records(props, topic, timeout), dict[str, Any]()
        if transactions:
            more, facts = _transactions(props, topic, timeout)
            answers.update(more)
        else:
            answers["read-committed"] = (None, "no transactions to abort: read_committed cannot be told apart")
        return answers, facts
    finally:
        # No request of the probe's may still be in flight when the topic goes: Tansu 0.6.0 (SQLite storage)
        # panicked serving a fetch of the scratch topic as it was deleted, and answered nothing after that. Its
        # consumers long-poll for FETCH_WAIT_MS at most; this waits that out, and a little more, first.
        time.sleep(4 * FETCH_WAIT_MS / 1000)
        with contextlib.suppress(Exception):
            admin.delete_topics([topic], operation_timeout=timeout)[topic].result(timeout)


def _records(props: Mapping[str, str], topic: str, timeout: float) -> Answers:
    producer = Producer(_quiet(props, **{"enable.idempotence": True, "message.timeout.ms": int(timeout * 1000)}))
    for i in range(2):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                         timestamp=STAMP + i, headers=[("cutover-probe", f"h{i}".encode())])
    if producer.flush(timeout) != 0:
        why = "two records written idempotently were not acknowledged within the timeout"
        return {"timestamps": (None, why), "headers": (None, why), "idempotent-producer": (False, why)}
    got = _read(props, topic, "read_uncommitted", 2, timeout)
    if len(got) < 2:
        why = f"2 records written, {len(got)} read back within {timeout:g}s"
        return {"timestamps": (None, why), "headers": (None, why)}
    stamps = [m.timestamp()[1] for m in got[:2]]
    headers = [m.headers() for m in got[:2]]
    want_headers = [[("cutover-probe", f"h{i}".encode())] for i in range(2)]
    return {
        "idempotent-producer": (True, "two records written with enable.idempotence were acknowledged"),
        "timestamps": (stamps == [STAMP, STAMP + 1],
                       f"records written with timestamps {STAMP}, {STAMP + 1} read back with {stamps[0]}, {stamps[1]}"),
        "headers": (headers == want_headers, "the records' headers read back as written" if headers == want_headers
                    else f"headers written {want_headers}, read back {headers}"),
    }


def _transactions(props: Mapping[str, str], topic: str, timeout: float) -> tuple[Answers, dict[str, Any]]:
    producer = Producer(_quiet(props, **{"transactional.id": f"cutover-probe-{uuid.uuid4().hex[:8]}",
                                         "transaction.timeout.ms": 60_000}))
    try:
        producer.init_transactions(timeout)
        for value, commit in ((b"committed", True), (b"aborted", False)):
            producer.begin_transaction()
            producer.produce(topic, value=value, partition=0, timestamp=STAMP + 2)
            producer.flush(timeout)
            if commit:
                producer.commit_transaction(timeout)
            else:
                producer.abort_transaction(timeout)
    except KafkaException as exc:
        why = f"a transaction could not be {'begun' if 'init' in str(exc).lower() else 'ended'}: {_text(exc)}"
        return {"transactions": (False, why), "read-committed": (None, "no transaction could be ended")}, {}
    committed = [m.value() for m in _read(props, topic, "read_committed", 3, timeout)]
    everything = [m.value() for m in _read(props, topic, "read_uncommitted", 4, timeout)]
    hidden = b"aborted" in everything and b"aborted" not in committed
    end = _end(props, topic, timeout)
    facts = {"end_offset_after_probe": end,  # 2 records, then 1 committed and 1 aborted, each with its marker
             "markers_take_offsets": None if end is None else end == 6}
    return {
        "transactions": (True, "a transaction was committed and another aborted"),
        "read-committed": (hidden if b"committed" in committed else None,
                           "read_committed hid the aborted record, read_uncommitted showed it" if hidden
                           else f"read_committed read {committed}, read_uncommitted {everything}"),
    }, facts


def _end(props: Mapping[str, str], topic: str, timeout: float) -> int | None:
    consumer = Consumer(_quiet(props, **{"group.id": f"cutover-probe-{uuid.uuid4().hex[:8]}",
                                         "fetch.wait.max.ms": FETCH_WAIT_MS}))
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)[1])
    except KafkaException:
        return None
    finally:
        consumer.close()


def _read(props: Mapping[str, str], topic: str, isolation: str, want: int, timeout: float) -> list[Any]:
    consumer = Consumer(_quiet(props, **{"group.id": f"cutover-probe-{uuid.uuid4().hex[:8]}",
                                         "enable.auto.commit": False, "isolation.level": isolation,
                                         "enable.partition.eof": True, "fetch.wait.max.ms": FETCH_WAIT_MS}))
    got: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is None:
                got.append(msg)
            elif err.code() == -191 and len(got) >= want - 1:  # _PARTITION_EOF: nothing more to come
                break
    finally:
        consumer.close()
    return got


def _create(admin: AdminClient, topic: str, timeout: float) -> None:
    for replication in (-1, 1):  # the cluster's default first; a platform without defaults takes 1
        try:
            admin.create_topics([NewTopic(topic, 1, replication)], operation_timeout=timeout)[topic].result(timeout)
            return
        except KafkaException:
            if replication == 1:
                raise


#: How long a probe consumer's fetch may wait at the broker for records (librdkafka's fetch.wait.max.ms): short, so
#: that none is still waiting there when the scratch topic is deleted.
FETCH_WAIT_MS = 50


def _quiet(props: Mapping[str, str], **extra: Any) -> dict[str, Any]:
    """The client's config, its log lines to cutover's debug log (never raw on stderr)."""
    return ClusterRef("probe", props).config(**extra)


def _text(exc: BaseException) -> str:
    err: Any = exc.args[0] if exc.args else None
    return str(err.str()) if err is not None and hasattr(err, "str") else str(exc)
