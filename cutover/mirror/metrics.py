"""Prometheus metrics of a running mirror (`--metrics-port`): lag per partition, totals, group syncs. And
`serve`, which the shadow and the exporter serve theirs with: on 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from cutover.common import TP
from cutover.errors import UsageError
from cutover.output import progress
from cutover.plan.endpoint import Endpoint


class Metrics:
    def __init__(self, at: Endpoint | None, direction: str = "forward") -> None:
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
        if at is not None:
            serve(self.registry, at, "mirror" if direction == "forward" else "reverse mirror")

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


def serve(registry: CollectorRegistry, at: Endpoint, who: str) -> str:
    """Serve the registry on http://HOST:PORT/metrics (a thread of this process) and say so on stderr; the URL.
    An address or port it cannot serve on is named as the user gave it, with its fix."""
    try:
        server, _thread = start_http_server(at.port, addr=at.host, registry=registry)
    except OSError as exc:
        raise _unservable(at, exc) from None
    host, port = str(server.server_address[0]), int(server.server_address[1])  # the address bound, as bound
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
    progress(f"{who}: serving metrics on {url}")
    return url


def _unservable(at: Endpoint, exc: OSError) -> UsageError:
    """Why the metrics cannot be served at `at`: the host (not resolved, not this host's) or the port (taken,
    privileged), named by the option or plan key that chose it, and fixed there."""
    port_option, host_option = at.options
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        host = at.said(at.host_from, at.host) if at.host_from else f"the default metrics host {at.host}"
        why = (f"cannot serve metrics there: the name does not resolve ({exc.strerror})"
               if isinstance(exc, socket.gaierror) else
               f"cannot serve metrics on {at.host}:{at.port}: it is not an address of this host ({exc.strerror}); "
               "`ip -brief address` lists this host's")
        return UsageError(f"{host}: {why}", fix=_fix(at, at.host_from, host_option, "an address of this host: "
                                                     "127.0.0.1 (this host only) or 0.0.0.0 (every interface)"))
    return UsageError(f"{at.said(at.port_from, at.port)}: cannot serve metrics on {at.host}:{at.port}: "
                      f"{exc.strerror or exc}",
                      fix=_fix(at, at.port_from, port_option, "a free port") + f"; or stop what holds it (ss -ltnp "
                          f"'sport = :{at.port}' shows it); ports below 1024 need privileges")


def _fix(at: Endpoint, chosen_by: str | None, option: str, what: str) -> str:
    """Give the command's `option` `what`, or change the plan key that chose the value."""
    plan_key = chosen_by is not None and chosen_by != option
    return f"give {option} {what}" + (f", or change {chosen_by} in {at.plan_file}" if plan_key else "")


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
