"""The drill's step registry: each action, fault and expectation a runbook names, with typed arguments.

Ops live by kind in `traffic`, `pipeline`, `faults` and `expect`; each registers itself
with `@op`. An op marked `injected` acts through the drill's fault injector
(`cutover.drill.faults`): against an environment that is not the local sandbox the
runner turns it into a manual instruction, so one runbook also guides a staging drill.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cutover.drill.context import Drill
from cutover.errors import CutoverError

Detail = dict[str, Any]


class ExpectationFailed(CutoverError):
    """A runbook expectation did not hold."""


@dataclass(frozen=True)
class Op:
    kind: str
    name: str
    args: type
    run: Callable[[Drill, Any], Detail]
    says: Callable[[Any], str]
    #: Acts through the fault injector: a manual instruction where faults are not automatic.
    injected: bool = False


OPS: dict[tuple[str, str], Op] = {}


def op(kind: str, name: str, args: type, says: Callable[[Any], str], injected: bool = False) -> Callable[
        [Callable[[Drill, Any], Detail]], Callable[[Drill, Any], Detail]]:
    def register(fn: Callable[[Drill, Any], Detail]) -> Callable[[Drill, Any], Detail]:
        OPS[(kind, name)] = Op(kind, name, args, fn, says, injected)
        return fn
    return register


@dataclass(frozen=True)
class NoArgs:
    pass


def deadline(seconds: float, what: str, check: Callable[[], Any], every: float = 0.5) -> Any:
    end = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise ExpectationFailed(f"{what}: not within {seconds:.0f}s")
        time.sleep(every)


def while_progressing(stall: float, what: str, remaining: Callable[[], int], every: float = 0.5) -> None:
    """Wait until nothing remains, for as long as what remains keeps shrinking: fail once it has
    not shrunk for `stall` seconds. For work whose pace depends on the machine (a consumer that
    commits what it reads works through its backlog more slowly on a loaded machine, but it moves)."""
    left, moved = remaining(), time.monotonic()
    while left:
        if time.monotonic() - moved > stall:
            raise ExpectationFailed(f"{what}: no progress for {stall:.0f}s, {left} still to go")
        time.sleep(every)
        now = remaining()
        if now < left:
            moved = time.monotonic()
        left = now


def topics_of(d: Drill, given: list[str] | None) -> list[str]:
    topics = given or [p.topic for p in d.plan.spec.tables]
    if not topics:
        raise CutoverError("the plan has no table pairs to take topics from; name them: with: {topics: [...]}")
    return topics


def need_traffic(d: Drill) -> Any:
    if d.traffic is None:
        raise CutoverError("no sample traffic is running (add a traffic.start step before this one)")
    return d.traffic
