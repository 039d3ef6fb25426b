"""The running forward mirror follows the old schema registry, as it follows topics and their configs.

Every `registry.sync_interval` a background thread plans the registry sync and carries out
what is left (new versions registered on the old registry), ids kept. It never holds up the
copy: a registry that does not answer or refuses is a warning, and the next round tries
again. One follower per mirror: the shard that owns index 0 (`--shard 0/N`), forward only
(the way back is the switch's, at rollback), and only in a continuous run (a catch-up run,
`--until-caught-up`, leaves the registry to `cutover registry sync`).
"""

from __future__ import annotations

import logging
import threading

from cutover.errors import CutoverError
from cutover.plan import Plan

log = logging.getLogger("cutover.mirror")


class RegistryFollower(threading.Thread):
    def __init__(self, plan: Plan, stop: threading.Event, timeout: float) -> None:
        super().__init__(name="cutover-registry-follower", daemon=True)
        self.plan, self.stop, self.timeout = plan, stop, timeout
        self.rounds = 0
        self.copied = 0
        self._last_problem = ""

    def run(self) -> None:
        from cutover.registry import sync

        assert self.plan.spec.registry is not None
        every = float(self.plan.spec.registry.sync_interval)
        while not self.stop.is_set():
            try:
                done = sync.run(self.plan, True, self.timeout)
                problem = "; ".join(done.refusals)
                if done.copied:
                    log.warning("registry: copied %d new version(s) to the new registry under their ids: %s",
                                len(done.copied), ", ".join(f"{v.subject} v{v.version} id {v.id}" for v in done.copied))
                self.copied += len(done.copied)
            except CutoverError as exc:
                problem = exc.message
            except Exception as exc:  # the follower never stops the mirror
                problem = f"{type(exc).__name__}: {exc}"
            if problem and problem != self._last_problem:
                log.error("registry sync while mirroring: %s (the mirror goes on; retrying every %.0fs)", problem,
                          every)
            self._last_problem = problem
            self.rounds += 1
            self.stop.wait(every)


def follower(plan: Plan, direction: str, shard_index: int, continuous: bool, stop: threading.Event,
             timeout: float) -> RegistryFollower | None:
    """The registry follower this mirror process runs, if any (started)."""
    if plan.spec.registry is None or direction != "forward" or shard_index != 0 or not continuous:
        return None
    thread = RegistryFollower(plan, stop, timeout)
    thread.start()
    return thread
