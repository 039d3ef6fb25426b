"""`cutover mirror --workers N`: the plan's N shards as N processes on this host, under one supervisor.

One Python process copies on one core; N worker processes (`--shard i/N` each, the shard
machinery as it is: own transactional id, own partitions, own state) use N. The supervisor
is what an operator sees: one exit code, one progress line, one metrics endpoint, one
summary. It forwards SIGTERM (each worker finishes its transaction in flight); a worker
also stops cleanly when the supervisor dies (PR_SET_PDEATHSIG).

A worker that fails or dies stops the whole run, and the supervisor exits with that
worker's exit code and error. It does not restart it: every way a worker ends early is
one a restart would meet again (fenced by another process, a record the target refuses,
a source that went backwards, a cluster that does not answer for the whole timeout),
and a restarted shard next to shards that went on would hide it. Running the same
command again resumes every shard exactly where its committed state stands.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cutover.errors import CutoverError, ExitCode, unexpected
from cutover.mirror import groups
from cutover.mirror.metrics import Metrics
from cutover.mirror.runner import Options, Progress, RunSummary, run, say_progress, topic_lag
from cutover.mirror.shard import Shard

log = logging.getLogger("cutover.mirror")

#: Seconds the supervisor gives the other workers to finish their transaction once one has failed.
STOP_GRACE = 60.0


class WorkerFailed(CutoverError):
    """A worker process failed or died; the others were stopped."""

    def __init__(self, message: str, *, fix: str | None = None, exit_code: ExitCode = ExitCode.ERROR) -> None:
        super().__init__(message, fix=fix)
        self.exit_code = exit_code


def supervise(plan_file: Path, opts: Options, workers: int, stop: threading.Event) -> RunSummary:
    """Run shards 0..workers-1 of the plan in worker processes until they are done (or `stop`)."""
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no client or thread of ours is copied
    events: Any = ctx.Queue()
    stopping = ctx.Event()
    shards = [Shard(i, workers) for i in range(workers)]
    procs = {str(s): ctx.Process(target=_work, name=f"cutover mirror worker {s}", daemon=False,
                                 args=(str(plan_file), replace(opts, shard=s, metrics_at=None, on_ready=None),
                                       events, stopping, logging.getLogger().level))
             for s in shards}
    board = _Board(opts, workers, Metrics(opts.metrics_at, opts.direction))
    for p in procs.values():
        p.start()
    failure: WorkerFailed | None = None
    try:
        while len(board.done) < workers:
            if stop.is_set() and not stopping.is_set():
                stopping.set()  # SIGTERM/SIGINT forwarded: each worker finishes its transaction in flight
            failure = failure or _take(events, board)
            if failure is None:
                failure = _dead(procs, board)
            if failure is not None:
                break
            if opts.on_ready is not None and board.ready_once():
                opts.on_ready()
            board.report()
    finally:
        stopping.set()
        _wait(procs, events, board)
    if failure is not None:
        raise failure
    board.report(final=True)
    return board.summary()


def _take(events: Any, board: _Board) -> WorkerFailed | None:
    """Serve the workers' messages for up to 0.2 s; a failure one reported."""
    with contextlib.suppress(queue.Empty):
        kind, shard, body = events.get(timeout=0.2)
        if kind == "progress":
            board.progress(shard, body)
        elif kind == "ready":
            board.ready.add(shard)
        elif kind == "done":
            board.done[shard] = body
        elif kind == "failed":
            message, fix, code = body
            return WorkerFailed(f"mirror worker {shard} stopped: {message}; the other workers were stopped "
                                "after their transaction in flight", fix=fix, exit_code=ExitCode(code))
    return None


def _dead(procs: Mapping[str, Any], board: _Board) -> WorkerFailed | None:
    for shard, p in procs.items():
        if shard not in board.done and p.exitcode:  # exit 0: its result or failure is still in the queue
            how = f"was killed by signal {-p.exitcode}" if p.exitcode < 0 else f"exited with code {p.exitcode}"
            return WorkerFailed(
                f"mirror worker {shard} (pid {p.pid}) {how} without a result; the other workers were stopped "
                "after their transaction in flight. Every shard's copied records and progress are committed "
                "together, so nothing was lost or copied twice",
                fix="see the worker's messages above (and the host's logs for a kill: the OOM killer?), then run "
                    "the same command again: every shard resumes at its committed position")
    return None


def _wait(procs: Mapping[str, Any], events: Any, board: _Board) -> None:
    """Let every worker finish its transaction in flight and exit; serve their last messages meanwhile."""
    deadline = time.monotonic() + STOP_GRACE
    while any(p.is_alive() for p in procs.values()) and time.monotonic() < deadline:
        _take(events, board)
    for shard, p in procs.items():
        if p.is_alive():
            log.error("mirror worker %s did not stop within %.0f s: killing it (its open transaction is aborted)",
                      shard, STOP_GRACE)
            p.kill()
        p.join(5)


@dataclass
class _Board:
    """What the workers said: their latest progress, readiness and results, and the one progress line."""

    opts: Options
    workers: int
    metrics: Metrics
    latest: dict[str, Progress] = field(default_factory=dict)
    ready: set[str] = field(default_factory=set)
    done: dict[str, RunSummary] = field(default_factory=dict)
    _told_ready: bool = False
    _last: tuple[float, int, int] = field(default_factory=lambda: (time.monotonic(), 0, 0))

    def progress(self, shard: str, p: Progress) -> None:
        before = self.latest.get(shard)
        self.latest[shard] = p
        self.metrics.observe(p.direction, p.ends, p.positions)
        self.metrics.copied(p.direction, p.records - (before.records if before else 0),
                            p.bytes - (before.bytes if before else 0),
                            p.transactions - (before.transactions if before else 0))
        for group, at in p.synced.items():
            self.metrics.synced(p.direction, group, at)

    def ready_once(self) -> bool:
        if self._told_ready or len(self.ready) < self.workers:
            return False
        self._told_ready = True
        return True

    def report(self, final: bool = False) -> None:
        now = time.monotonic()
        at, records0, bytes0 = self._last
        if not self.latest or (not final and now - at < self.opts.report_every):
            return
        records = sum(p.records for p in self.latest.values())
        nbytes = sum(p.bytes for p in self.latest.values())
        lag: dict[str, int] = {}
        for p in self.latest.values():
            topic_lag(p.ends, p.positions, lag)
        direction = next(iter(self.latest.values())).direction
        say_progress(f"{direction}, {self.workers} workers", records, nbytes, (records0, bytes0), now - at, lag)
        self._last = (now, records, nbytes)

    def summary(self) -> RunSummary:
        runs = [self.done[str(Shard(i, self.workers))] for i in range(self.workers)]
        merged: dict[str, groups.GroupOutcome] = {}
        for r in runs:
            for o in r.groups:
                m = merged.setdefault(o.group, groups.GroupOutcome(o.group))
                m.committed.update(o.committed)
                m.skipped.update(o.skipped)
                m.reason = m.reason or o.reason
                m.unmirrored = sorted(set(m.unmirrored) | set(o.unmirrored))
        return RunSummary(runs[0].direction, f"0-{self.workers - 1}/{self.workers}", runs[0].source_cluster,
                          sum(r.records for r in runs), sum(r.bytes for r in runs),
                          sum(r.transactions for r in runs), max(r.seconds for r in runs),
                          tuple(sorted((p for r in runs for p in r.partitions), key=lambda p: (p.topic, p.partition))),
                          tuple(merged[g] for g in sorted(merged)))


def _work(plan_file: str, opts: Options, events: Any, stopping: Any, level: int) -> None:
    """One worker process: the plan's shard `opts.shard`, reporting to the supervisor."""
    from cutover.plan import load_plan

    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    logging.basicConfig(level=level, format=f"%(levelname)s %(name)s [worker {opts.shard}]: %(message)s")
    shard = str(opts.shard)

    def forward() -> None:
        # Polled, not stopping.wait(): a process killed while it waits on a multiprocessing Event makes
        # every later set() block forever (its Condition waits for the dead sleeper to wake).
        while not stopping.is_set() and not stop.is_set():
            time.sleep(0.1)
        stop.set()

    threading.Thread(target=forward, daemon=True).start()
    opts = replace(opts, on_ready=lambda: events.put(("ready", shard, None)),
                   reporter=lambda p: events.put(("progress", shard, p)))
    try:
        events.put(("done", shard, run(load_plan(plan_file), opts, stop)))
    except CutoverError as exc:
        events.put(("failed", shard, (exc.message, exc.fix, int(exc.exit_code))))
    except Exception as exc:  # a cluster's answer no step named, or a bug: said by the supervisor as the CLI says it
        log.exception("mirror worker %s failed", shard)
        message, fix = unexpected(exc)
        events.put(("failed", shard, (message, fix.strip("()") + "; the traceback is above", int(ExitCode.ERROR))))
    events.close()
    events.join_thread()


def _die_with_parent() -> None:
    """SIGTERM this worker when the supervisor dies (Linux): a clean stop, never an orphan copying on."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the supervisor was gone before the line above
        os.kill(os.getpid(), signal.SIGTERM)
