"""Prometheus metrics of a running mirror (`--metrics-port`): lag per partition, totals, group syncs."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from cutover.common import TP
from cutover.errors import UsageError


class Metrics:
    def __init__(self, port: int | None) -> None:
        self.registry = CollectorRegistry()
        labels = ["direction", "topic", "partition"]
        self.lag = Gauge("cutover_mirror_lag_records", "Source end offset minus mirrored position",
                         labels, registry=self.registry)
        self.source_end = Gauge("cutover_mirror_source_end_offset", "Source end offset (committed)",
                                labels, registry=self.registry)
        self.position = Gauge("cutover_mirror_position_offset", "Next source offset to mirror",
                              labels, registry=self.registry)
        self.records = Counter("cutover_mirror_records", "Records copied", ["direction"], registry=self.registry)
        self.bytes = Counter("cutover_mirror_bytes", "Key and value bytes copied", ["direction"],
                             registry=self.registry)
        self.transactions = Counter("cutover_mirror_transactions", "Transactions committed", ["direction"],
                                    registry=self.registry)
        self.group_sync = Gauge("cutover_mirror_group_sync_timestamp_seconds", "Last sync of a consumer group",
                                ["direction", "group"], registry=self.registry)
        if port is not None:
            serve(self.registry, port)

    def observe(self, direction: str, ends: Mapping[TP, int], positions: Mapping[TP, int]) -> None:
        """Source end offsets and the mirror's positions (next source offset to mirror) per partition."""
        for tp, end in ends.items():
            position = positions.get(tp)
            labels = (direction, tp[0], str(tp[1]))
            self.source_end.labels(*labels).set(end)
            if position is not None:
                self.position.labels(*labels).set(position)
                self.lag.labels(*labels).set(max(0, end - position))

    def copied(self, direction: str, records: int, nbytes: int, transactions: int) -> None:
        self.records.labels(direction).inc(records)
        self.bytes.labels(direction).inc(nbytes)
        self.transactions.labels(direction).inc(transactions)

    def synced(self, direction: str, group: str, at: float) -> None:
        self.group_sync.labels(direction, group).set(at)


def serve(registry: CollectorRegistry, port: int) -> None:
    """Serve the registry on http://HOST:port/metrics (a thread of this process); a port in use, named."""
    try:
        start_http_server(port, registry=registry)
    except OSError as exc:
        raise UsageError(f"--metrics-port {port}: cannot serve metrics on port {port} of this host: "
                         f"{exc.strerror or exc}",
                         fix=f"choose a free port, or stop what holds it (ss -ltnp 'sport = :{port}' "
                             "shows it); ports below 1024 need privileges") from None


def reference(served: object | None = None) -> str:
    """Every metric a part serves (default: the mirror's), as a Markdown table (the docs site's metrics
    reference): the attributes of `served` that are metrics."""
    from prometheus_client import Histogram

    rows = ["| metric | type | labels | meaning |", "|---|---|---|---|"]
    for metric in vars(served if served is not None else Metrics(None)).values():
        if isinstance(metric, Gauge | Counter | Histogram):
            kind = "counter" if isinstance(metric, Counter) else "histogram" if isinstance(metric, Histogram) \
                else "gauge"
            name = metric._name + ("_total" if kind == "counter" else "")  # prometheus-client's own names
            rows.append(f"| `{name}` | {kind} | {', '.join(metric._labelnames)} | {metric._documentation} |")
    return "\n".join(rows) + "\n"
