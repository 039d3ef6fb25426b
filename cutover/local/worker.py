"""The sandbox's Kafka Connect worker (the Iceberg sink's runtime): its state, and the sandbox's
methods that start, move, stop and describe it (cutover.local.connect runs the process)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cutover.errors import SandboxError
from cutover.local import broker, connect
from cutover.output import progress
from cutover.plan import ClusterSide


@dataclass
class ConnectState:
    """The Kafka Connect worker, once started: the cluster it runs on, its REST port, its PID."""

    cluster: ClusterSide
    port: int
    pid: int | None = None


class _Box(Protocol):
    """What the worker's methods use of the sandbox."""

    dir: Path

    def _locked(self) -> AbstractContextManager[None]: ...
    def _load(self) -> Any: ...
    def _save(self, state: Any) -> None: ...
    def _describe(self, state: Any) -> dict[str, Any]: ...
    def specs(self, side: ClusterSide, st: Any) -> list[broker.BrokerSpec]: ...
    def client_properties(self, side: ClusterSide, st: Any) -> dict[str, str]: ...
    def connect_spec(self: _Box, cs: ConnectState) -> connect.ConnectSpec: ...
    def _stop_connect(self: _Box, state: Any, kill: bool) -> bool: ...


class ConnectWorker:
    """Mixed into Sandbox."""

    def connect_spec(self: _Box, cs: ConnectState) -> connect.ConnectSpec:
        return connect.ConnectSpec(self.dir / "connect", cs.port, cs.cluster)

    def start_connect(self: _Box, cluster: ClusterSide | None = None) -> dict[str, Any]:
        """Start the Connect worker on `cluster` (default: where it ran last, else old). Running on
        the other cluster, it is stopped first and started on this one, as an operator moves a
        Connect cluster; its connectors are then created there again."""
        with self._locked():
            state = self._load()
            from cutover.local.ports import free_port

            cs = state.connect or ConnectState(cluster or "old", free_port())
            spec = self.connect_spec(cs)
            if broker.running(spec, cs.pid) and cluster not in (None, cs.cluster):
                progress(f"stopping the {spec.title} to move it to the {cluster} cluster")
                connect.stop(spec, cs.pid)
                cs.pid = None
            cs.cluster = cluster or cs.cluster
            spec = self.connect_spec(cs)
            if not broker.running(spec, cs.pid):
                st = state.clusters[cs.cluster]
                if not all(broker.running(b, n.pid) for b, n in zip(self.specs(cs.cluster, st), st.nodes,
                                                                      strict=True)):
                    raise SandboxError(f"the {cs.cluster} cluster is not running: the Connect worker runs on it",
                                       fix=f"cutover local start {cs.cluster}, then start connect again")
                from cutover.kafka.java_client import java_properties

                progress(f"starting the {spec.title} at {spec.url}")
                cs.pid = connect.start(spec, java_properties(cs.cluster, self.client_properties(cs.cluster, st)))
            state.connect = cs
            self._save(state)
            described: dict[str, Any] = self._describe(state)["connect"]
            return described

    def stop_connect(self: _Box, kill: bool = False) -> dict[str, Any]:
        with self._locked():
            state = self._load()
            return {"part": "connect", "was_running": self._stop_connect(state, kill), "killed": kill}

    def _stop_connect(self: _Box, state: Any, kill: bool) -> bool:
        cs = state.connect
        if cs is None:
            return False
        spec = self.connect_spec(cs)
        if broker.running(spec, cs.pid):
            progress(f"{'killing' if kill else 'stopping'} the {spec.title}")
        was = connect.stop(spec, cs.pid, kill)
        cs.pid = None
        self._save(state)
        return was

    def _describe_connect(self: _Box, state: Any) -> dict[str, Any] | None:
        cs = state.connect
        if cs is None:
            return None
        spec = self.connect_spec(cs)
        alive = broker.running(spec, cs.pid)
        return {"cluster": cs.cluster, "url": spec.url, "port": cs.port, "running": alive,
                "pid": cs.pid if alive else None, "log": str(spec.log_file)}
