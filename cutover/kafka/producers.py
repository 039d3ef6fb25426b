"""Who writes to a cluster: its transactional ids (ListTransactions) and the producers each partition
has seen recently (DescribeProducers: idempotent and transactional ones, as long as the broker keeps
their state, `transactional.id.expiration.ms` / `producer.id.expiration.ms`). Read through Kafka's Java
Admin API (Producers.java, run by kafka/java_admin.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from cutover import jvm
from cutover.common import TP
from cutover.kafka import java_admin
from cutover.kafka.clients import ClusterRef

_PROGRAM = jvm.JAVA_SOURCES / "Producers.java"


@dataclass(frozen=True)
class Transaction:
    transactional_id: str
    producer_id: int
    #: Kafka's TransactionState: Ongoing, PrepareCommit, CompleteCommit, Empty, ...
    state: str


@dataclass(frozen=True)
class Producer:
    topic: str
    partition: int
    producer_id: int
    epoch: int
    last_timestamp: int
    #: the offset where its open transaction began (None: none open)
    transaction_start: int | None


@dataclass(frozen=True)
class Writers:
    transactions: tuple[Transaction, ...]
    producers: tuple[Producer, ...]

    def transactional(self) -> set[int]:
        return {t.producer_id for t in self.transactions}


def read(ref: ClusterRef, tps: Iterable[TP], timeout: float) -> Writers:
    args = [f"{t}:{p}" for t, p in tps]
    out = java_admin.run(_PROGRAM, ref, args, "listing its transactions and producers", timeout,
                         denied_fix="grant cutover's principal DESCRIBE on the topics and on TRANSACTIONAL_ID "
                                    "resources (ListTransactions lists only the ids it may describe)")
    transactions, producers = [], []
    for line in out.splitlines():
        row = json.loads(line)
        if "transaction" in row:
            transactions.append(Transaction(row["transaction"], int(row["producer_id"]), row["state"]))
        else:
            start = int(row["transaction_start"])
            producers.append(Producer(row["topic"], int(row["partition"]), int(row["producer_id"]), int(row["epoch"]),
                                      int(row["last_timestamp"]), None if start < 0 else start))
    return Writers(tuple(sorted(transactions, key=lambda t: t.transactional_id)),
                   tuple(sorted(producers, key=lambda p: (p.topic, p.partition, p.producer_id))))
