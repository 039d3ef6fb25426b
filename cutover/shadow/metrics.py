"""Prometheus metrics of a running shadow (`cutover shadow --metrics-port`), per table: commits, rows,
batches, failures and retries, dead letters by reason, lag per partition, batch duration and freshness.
Named and labelled as the mirror's (cutover_mirror_*): cutover_shadow_*, `table` on every series."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cutover.plan.endpoint import Endpoint

#: Batch durations (seconds): a trigger interval is seconds; a commit that retries through an outage, minutes.
BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, float("inf"))
#: The metrics served by this process, by address (ShadowMetrics.serving).
_served: dict[tuple[str, int], ShadowMetrics] = {}


class ShadowMetrics:
    @classmethod
    def serving(cls, at: Endpoint) -> ShadowMetrics:
        """The metrics this process serves at `at`, made (and the port bound) at the first call: a drill's
        shadow runs, one after another in one process, count on."""
        made = _served.get((at.host, at.port))
        if made is None:
            made = _served[(at.host, at.port)] = cls(at)
        return made

    def __init__(self, at: Endpoint | None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.last_commit = Gauge("cutover_shadow_last_commit_timestamp_seconds",
                                 "When the table's last commit by the shadow succeeded", ["table"], registry=r)
        self.rows = Counter("cutover_shadow_rows", "Rows committed to the table", ["table"], registry=r)
        self.batches = Counter("cutover_shadow_batches", "Batches committed to the table", ["table"], registry=r)
        self.failures = Counter("cutover_shadow_commit_failures", "Commit attempts that failed (the catalog or "
                                "storage); each is retried until commit_timeout", ["table"], registry=r)
        self.gave_up = Counter("cutover_shadow_commit_gave_up", "Batches whose commit failed past commit_timeout "
                               "(the shadow stops)", ["table"], registry=r)
        self.dead_letters = Counter("cutover_shadow_dead_letters", "Records written to the dead-letter table, by "
                                    "reason", ["table", "reason"], registry=r)
        self.lag = Gauge("cutover_shadow_lag_records", "The topic's end offset minus the table's next offset",
                         ["table", "topic", "partition"], registry=r)
        self.gap = Gauge("cutover_shadow_retention_gap_records", "Records retention deleted before the table got "
                         "them: the topic's log start offset minus the table's next offset (DATA LOSS when above 0)",
                         ["table", "topic", "partition"], registry=r)
        self.duration = Histogram("cutover_shadow_batch_duration_seconds", "A batch, read to committed",
                                  ["table"], buckets=BUCKETS, registry=r)
        self.freshness = Gauge("cutover_shadow_freshness_seconds", "Now minus the Kafka timestamp of the newest "
                               "record committed, at the commit", ["table"], registry=r)
        if at is not None:
            from cutover.mirror.metrics import serve

            serve(self.registry, at, "shadow")

    def writes(self, table: str) -> None:
        """A table this shadow writes: its counters start at 0 (rate() and alerts see a series from the start)."""
        for counter in (self.rows, self.batches, self.failures, self.gave_up):
            counter.labels(table)

    def committed(self, table: str, rows: int, seconds: float, at: float, newest: float | None) -> None:
        self.rows.labels(table).inc(rows)
        self.batches.labels(table).inc()
        self.duration.labels(table).observe(seconds)
        self.last_commit.labels(table).set(at)
        if newest is not None:
            self.freshness.labels(table).set(max(0.0, at - newest))

    def dead_lettered(self, table: str, reasons: Mapping[str, int]) -> None:
        for reason, n in reasons.items():
            self.dead_letters.labels(table, reason).inc(n)

    def behind(self, table: str, topic: str, positions: Mapping[int, int], starts: Mapping[int, int],
               ends: Mapping[int, int]) -> None:
        """The table's next offset per partition against the topic's log start and end offsets."""
        for partition, at in positions.items():
            self.lag.labels(table, topic, str(partition)).set(max(0, ends[partition] - at))
            self.gap.labels(table, topic, str(partition)).set(max(0, starts[partition] - at))
