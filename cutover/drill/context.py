"""What a drill holds while it runs: the plan, the sandbox (when the plan is the sandbox's),
the sample traffic, background processes, step results, and the samples of its timeline (view.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutover import process
from cutover.common import NETWORK_TIMEOUT
from cutover.drill.faults import ByHand, FaultInjector
from cutover.drill.traffic import GroupConsumer, Traffic
from cutover.plan import Plan, derive
from cutover.verify.results import VerifyResult

if TYPE_CHECKING:
    from cutover.local.sandbox import Sandbox
    from cutover.shadow.metrics import ShadowMetrics


@dataclass
class StepResult:
    number: int
    name: str
    kind: str
    op: str
    started: float
    ended: float | None = None
    outcome: str = "running"  # passed | failed | error | skipped | manual
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def seconds(self) -> float | None:
        return round(self.ended - self.started, 3) if self.ended is not None else None

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "name": self.name, "kind": self.kind, "op": self.op,
                "started": self.started, "ended": self.ended, "seconds": self.seconds, "outcome": self.outcome,
                "detail": self.detail, "error": self.error}


@dataclass
class Drill:
    plan: Plan
    folder: Path
    #: the local sandbox, when the plan's clusters are its clusters (None: a real environment)
    sandbox: Sandbox | None
    auto: bool
    #: Asks a person whether a manual step is done (None: nobody to ask)
    confirm: Callable[[str], bool] | None = None
    traffic: Traffic | None = None
    consumer: GroupConsumer | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    results: list[StepResult] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    #: what the drill's shadow runs count (served on the plan's observability.ports.shadow when given)
    shadow_metrics: ShadowMetrics | None = None
    #: the last verify the drill ran (for the verify-passed expectation)
    verified: VerifyResult | None = None
    #: the transactional producer of an application paused mid-transaction (fault transaction.open)
    open_txn: Any | None = None
    #: where environment faults go: the sandbox, or ByHand (manual instructions) anywhere else
    faults: FaultInjector = field(default_factory=ByHand)
    #: seconds to wait for any one answer from a cluster, the catalog or the storage (--timeout)
    timeout: float = NETWORK_TIMEOUT
    #: the runbook has the fault switch.kill: the switch plan's before_step hook kills on its cue
    kills_switch: bool = False
    _switch_plan: Plan | None = None

    @property
    def ctl(self) -> Path:
        path = self.folder / "ctl"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def result(self, name: str) -> StepResult | None:
        return next((r for r in self.results if r.name == name), None)

    def switch_plan(self) -> Plan:
        """The plan promote and rollback run with: on the sandbox, hooks that drive the drill's own
        traffic (and pause and move its Iceberg sink connectors), and a journal and routing file in
        the drill's folder; elsewhere the plan as it is."""
        if self._switch_plan is not None:
            return self._switch_plan
        if self.sandbox is None:
            self._switch_plan = self.plan
            return self.plan
        from cutover.drill import sink

        switch = dataclasses.asdict(self.plan.spec.switch)
        file, hooks = self.folder / "switch-plan.yaml", control_hooks(self.folder / "hooks", self.ctl)
        if self.kills_switch:
            hooks.update(kill_hook(self.folder / "hooks", self.ctl))
        if sink.pairs(self.plan):  # the operator's part with the Iceberg sink connector
            hooks.update(sink.hooks(self.folder / "hooks", file, self.sandbox.dir))
        self._switch_plan = derive(self.plan.file, file, hooks=hooks,
                                   routing={"file": str(self.folder / "routing.json")},
                                   switch={**switch, "journal_dir": str(self.folder / "journal")})
        return self._switch_plan

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        """A cutover command in the background (its own process group), logging to the drill folder."""
        proc = process.spawn([*args, "--timeout", str(self.timeout)], self.folder / f"{name}.log")
        self.procs[name] = proc
        return proc

    def running(self, name: str) -> int | None:
        """The pid of the background process `name` if it is alive."""
        proc = self.procs.get(name)
        return proc.pid if proc is not None and proc.poll() is None else None

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 60) -> int | None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        return proc.returncode

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name, signal.SIGTERM)
        if self.sandbox is not None and self._switch_plan is not None:
            # the rehearsal's promote started a reverse mirror with the drill's own journal: it ends with
            # the drill (on a real environment the switch plan is the real one, and its mirror stays)
            from cutover.switch import background

            background.stop(self._switch_plan)
        for part in (self.traffic, self.consumer):
            if part is not None:
                part.stop()
        self.faults.release()
        if self.open_txn is not None:  # a drill that stopped with its application's transaction still open
            self.open_txn.abort_transaction(30)
            self.open_txn = None


def control_hooks(folder: Path, ctl: Path) -> dict[str, str]:
    """Switch hooks that freeze, stop and resume the sample traffic through its control files in `ctl`
    (the protocol of `cutover.drill.traffic`): hook event -> script. Each waits for the acknowledgement
    only while the producer or consumer runs."""
    folder.mkdir(parents=True, exist_ok=True)
    wait = ('[ -f "{c}/{who}.running" ] || exit 0\n'
            'i=0; while [ ! -f "{c}/{ack}" ]; do i=$((i+1)); [ $i -gt 2400 ] && exit 1; sleep 0.05; done\n')
    scripts = {
        "freeze_producers": f'touch "{ctl}/pause"\n' + wait.format(c=ctl, who="producer", ack="producer.paused"),
        "stop_consumers": f'touch "{ctl}/stop"\n' + wait.format(c=ctl, who="consumer", ack="consumer.stopped"),
        "resume": f'rm -f "{ctl}/pause" "{ctl}/stop"\n',
    }
    return _scripts(folder, scripts)


def kill_hook(folder: Path, ctl: Path) -> dict[str, str]:
    """The hook of the fault switch.kill: before_step SIGKILLs the switch process as the step cued by the file
    `ctl`/kill.ACTION.STEP begins, however short that step is."""
    return _scripts(folder, {"before_step": (
        f'f="{ctl}/kill.$CUTOVER_ACTION.$CUTOVER_STEP"\n'
        'if [ -f "$f" ]; then rm -f "$f"; echo "the drill kills cutover in step $CUTOVER_STEP"; '
        'kill -9 $PPID; while kill -0 $PPID 2>/dev/null; do sleep 0.01; done; fi\n')})


def _scripts(folder: Path, scripts: dict[str, str]) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    for event, body in scripts.items():
        (folder / event).write_text("#!/bin/sh\n" + body)
        (folder / event).chmod(0o755)
    return {event: str(folder / event) for event in scripts}
