"""Kafka Connect's REST API: connectors created, paused, resumed, stopped and deleted, their state
read, with bounded waits and named errors.

A connector's state is its own and every task's (`RUNNING`, `PAUSED`, `STOPPED`, `FAILED`,
`UNASSIGNED`, `RESTARTING`); a task that failed carries the worker's trace, whose first line is
quoted in the error. The standard library's HTTP client is enough: the API is JSON over plain
HTTP on the worker's REST listener.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cutover import secrets
from cutover.errors import CutoverError, UnreachableError

#: What a call with missing_ok answers when there is no such connector (404).
_MISSING = object()
#: How long one REST call may take (a rebalance in progress answers 409 at once; the worker
#: forwards a write to the leader, which can take a moment).
CALL_TIMEOUT = 30.0


class ConnectError(CutoverError):
    """The Connect worker refused a call, or a connector did not reach the state asked for."""


@dataclass(frozen=True)
class ConnectorState:
    name: str
    #: The connector's own state, and each task's by id.
    state: str
    tasks: dict[int, str]
    #: The first line of each failed task's trace.
    failures: dict[int, str]

    def is_(self, state: str) -> bool:
        """The connector and all its tasks (at least one; none when STOPPED) in `state`."""
        if state == "STOPPED":
            return self.state == state and not self.tasks
        return self.state == state and bool(self.tasks) and all(s == state for s in self.tasks.values())


class Connect:
    """One Connect cluster, through one worker's REST listener (`http://host:port`)."""

    def __init__(self, url: str, timeout: float = CALL_TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    # ----- calls ------------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    text = answer.read()
                    return json.loads(text) if text else None
            except urllib.error.HTTPError as exc:
                if exc.code == 404 and missing_ok:
                    return _MISSING
                text = _message(exc)
                # 409: a rebalance is in progress; 500 "a rebalance is expected": a worker that has just
                # started (or moved) and not yet joined its group. Both ask to be asked again.
                rebalancing = exc.code == 409 or (exc.code == 500 and "rebalance is expected" in text)
                if rebalancing and time.monotonic() < deadline:
                    time.sleep(0.5)
                    continue
                raise ConnectError(f"Kafka Connect at {self.url} answered {method} {path} with {exc.code}: "
                                   f"{text}",
                                   fix="check the connector's name and configuration, and the worker's log") from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise UnreachableError(f"Kafka Connect at {self.url} did not answer {method} {path}: {reason}",
                                       fix="check the Connect worker's REST address (listeners) and that it "
                                       "runs") from None

    def version(self) -> dict[str, Any]:
        """The worker's Kafka version, commit, and the Kafka cluster id it runs on."""
        answer: dict[str, Any] = self._call("GET", "/")
        return answer

    def plugins(self) -> list[str]:
        return [p["class"] for p in self._call("GET", "/connector-plugins")]

    def connectors(self) -> list[str]:
        return list(self._call("GET", "/connectors"))

    def config(self, name: str) -> dict[str, str] | None:
        answer = self._call("GET", f"/connectors/{name}/config", missing_ok=True)
        return None if answer is _MISSING else dict(answer)

    def put(self, name: str, config: dict[str, str]) -> None:
        """Create the connector, or change its configuration (its tasks restart with it)."""
        _register_secrets(config)
        self._call("PUT", f"/connectors/{name}/config", {k: str(v) for k, v in config.items()})

    def pause(self, name: str) -> None:
        self._call("PUT", f"/connectors/{name}/pause")

    def resume(self, name: str) -> None:
        self._call("PUT", f"/connectors/{name}/resume")

    def stop(self, name: str) -> None:
        """STOPPED: the tasks shut down (their consumers leave the group), the configuration is kept."""
        self._call("PUT", f"/connectors/{name}/stop")

    def delete(self, name: str, timeout: float = 60) -> bool:
        """Delete the connector and wait until its tasks have stopped (its status is gone); whether
        there was one of that name."""
        if self._call("DELETE", f"/connectors/{name}", missing_ok=True) is _MISSING:
            return False
        self._until(lambda: self.state(name) is None, timeout, f"connector {name} deleted")
        return True

    def offsets(self, name: str) -> list[dict[str, Any]] | None:
        """A connector's committed offsets (KIP-875, Connect 3.6+): [{partition, offset}]; None when there is
        no such connector."""
        answer = self._call("GET", f"/connectors/{name}/offsets", missing_ok=True)
        return None if answer is _MISSING else list(answer.get("offsets") or [])

    def restart(self, name: str) -> None:
        self._call("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")

    def _until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise ConnectError(f"Kafka Connect at {self.url}: not {what} within {timeout:.0f}s",
                                   fix="read the Connect worker's log")
            time.sleep(0.2)

    def state(self, name: str) -> ConnectorState | None:
        raw = self._call("GET", f"/connectors/{name}/status", missing_ok=True)
        if raw is _MISSING:
            return None
        tasks = {int(t["id"]): str(t["state"]) for t in raw.get("tasks", [])}
        failures = {int(t["id"]): str(t.get("trace", "")).strip().splitlines()[0]
                    for t in raw.get("tasks", []) if t["state"] == "FAILED" and t.get("trace")}
        return ConnectorState(name, str(raw["connector"]["state"]), tasks, failures)

    def wait(self, name: str, state: str, timeout: float) -> ConnectorState:
        """Until the connector and every task are in `state`; a failed task ends the wait at once."""
        deadline = time.monotonic() + timeout
        last: ConnectorState | None = None
        while True:
            last = self.state(name)
            if last is not None:
                if last.is_(state):
                    return last
                if last.failures and state != "FAILED":
                    task, line = next(iter(last.failures.items()))
                    raise ConnectError(f"connector {name} at {self.url}: task {task} failed: {line}",
                                       fix="read the Connect worker's log for the whole trace, fix the cause, "
                                       "then restart the connector's failed tasks")
            if time.monotonic() > deadline:
                seen = "no such connector" if last is None else \
                    f"connector {last.state}, tasks {last.tasks or 'none yet'}"
                raise ConnectError(f"connector {name} at {self.url} was not {state} within {timeout:.0f}s ({seen})",
                                   fix="read the Connect worker's log")
            time.sleep(0.2)


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return exc.reason if isinstance(exc.reason, str) else str(exc.reason)
    text = str(body.get("message") or exc.reason)
    return secrets.scrub(text.strip().splitlines()[0] if text.strip() else text)


def _register_secrets(config: dict[str, str]) -> None:
    """Values of password-like keys never appear in what cutover prints."""
    for key, value in config.items():
        if any(word in key.lower() for word in ("password", "secret", "credential", "token")) and value:
            secrets.register(str(value))

