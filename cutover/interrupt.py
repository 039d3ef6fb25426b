"""Ctrl-C that answers and a --timeout that holds, even while a client library waits.

librdkafka and the JVM wait in C code: Python runs a signal handler, and a command
notices its deadline, only when that wait returns, up to a client timeout later (30 s).
A watcher thread learns of each SIGINT at once (Python's C-level handler writes it to the
signal wakeup fd) and ends the process itself when the main thread cannot:

- (only while a command runs under `main()`; an in-process caller is left alone afterwards)
- one SIGINT: the command's own handling runs (KeyboardInterrupt; for the mirror and the
  shadow, a clean stop that finishes the work in flight); if the process has not ended
  within GRACE seconds, it ends with exit 130 and says what was left unfinished;
- a second SIGINT ends it at once;
- SIGTERM is the clean stop of supervisors and drills: no deadline here (a supervisor
  sends SIGKILL after its own grace period);
- `bound(seconds)`: a one-shot command (plan check, status, ...) ends with exit 1 once its
  --timeout (and SAY_WHY seconds to explain a failure) has passed, whatever it waits on; it is
  the backstop: such a command asks its parts `side_by_side`, and a part that has not answered
  before the backstop would fire is named in the report as late, so that the report is printed.

The process ends through os._exit: threads stuck in a client library are not waited for.
Every side effect of cutover is safe against a crash at any point (journals, Kafka
transactions, Iceberg commits), so an interrupt never leaves a half-done state behind;
`cleaning()` marks the places that must finish first (stopping the processes a drill or
a sandbox start launched, restoring a drill's fault, a switch's on_failure hook), so none
is left behind; a second Ctrl-C still ends them at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from cutover.common import exact
from cutover.errors import ExitCode

#: Seconds a command has, after Ctrl-C, to end on its own.
GRACE = 1.0
#: Seconds a one-shot command may take past its --timeout to say why a wait failed (a TLS handshake of its
#: own, librdkafka's last log lines) before it is ended without that.
SAY_WHY = 3.0


T = TypeVar("T")


@dataclass(frozen=True)
class Late:
    """A part of a one-shot command that had not answered by the command's deadline."""

    seconds: float

    @property
    def message(self) -> str:
        return f"did not answer within the --timeout of {exact(self.seconds)}s"


def report_by(timeout: float) -> float:
    """When a one-shot command should stop asking and write its report (time.monotonic()): `timeout` from now, or
    earlier when its start took part of its --timeout, leaving the seconds its backstop gives to say why."""
    end = time.monotonic() + timeout
    return end if _backstop_at is None else min(end, _backstop_at - GRACE - SAY_WHY)


def last_wait_end(timeout: float) -> float:
    """The latest a part's wait that began now may end (time.monotonic()): `timeout` from now, and a second before
    the backstop leaves the command its report's own seconds (its start took part of its --timeout)."""
    end = time.monotonic() + timeout
    return end if _backstop_at is None else min(end, _backstop_at - GRACE - 1.0)


#: Parts left running by an earlier call, by scope and name: not started again while they still run.
_left_running: dict[str, threading.Thread] = {}


def side_by_side(parts: Mapping[str, Callable[[], T]], timeout: float, scope: str = "") -> dict[str, T | Late]:
    """Each part in a thread of its own, all at once; what each returned by `timeout` (and most of SAY_WHY, for a
    part whose own wait of `timeout` ends in its explanation) from now, and two seconds before the command's
    backstop at the latest, else Late. A part left running is not
    waited for (a daemon thread: a client library's wait is not cut short, and it does not hold the process).
    A part that an earlier call of the same `scope` left running is Late at once, not started beside it: a
    process that asks again and again (the exporter's scrapes, status --watch) keeps one thread per hung part.
    A part must not raise for an expected failure (return it); an unexpected exception is raised here."""

    results: dict[str, tuple[bool, Any]] = {}
    threads = {}
    out: dict[str, T | Late] = {}
    for name, part in parts.items():
        key = f"{scope}\0{name}"
        earlier = _left_running.get(key)
        if earlier is not None and earlier.is_alive():
            out[name] = Late(timeout)
            continue
        def run(name: str = name, part: Callable[[], T] = part) -> None:
            try:
                results[name] = (True, part())
            except BaseException as exc:  # handed to the caller's thread below
                results[name] = (False, exc)

        threads[name] = threading.Thread(target=run, name=f"cutover-part-{name}", daemon=True)
        threads[name].start()
    end = last_wait_end(timeout + SAY_WHY - 1.0)  # a part's own wait of `timeout` may end in its explanation
    for name, thread in threads.items():
        thread.join(max(0.0, end - time.monotonic()))
        if name not in results:
            _left_running[f"{scope}\0{name}"] = thread
            out[name] = Late(timeout)
            continue
        ok, value = results[name]
        if not ok:
            raise value
        out[name] = value
    return {name: out[name] for name in parts}  # in the parts' order


@dataclass
class _Graceful:
    stop: threading.Event
    #: What a clean stop finishes first, now ("the transaction in flight"); None: nothing is in flight.
    in_flight: Callable[[], str | None]


_installed = False
#: A command runs under `main()` (the watcher acts only then; an in-process caller outlives it).
_active = False
_interrupts = 0
_timers: list[threading.Timer] = []
#: When the armed backstop ends the command (time.monotonic()), or None: side_by_side answers a second before it.
_backstop_at: float | None = None
_graceful: _Graceful | None = None
_cleaning = 0
_lock = threading.Lock()


def install() -> None:
    """Start the watcher (once per process; only from the main thread) and mark a command as running.
    A process started with SIGINT ignored (`cmd &` in a script) keeps ignoring it."""
    global _installed, _active, _interrupts
    if threading.current_thread() is not threading.main_thread():
        return
    _active, _interrupts = True, 0
    if _installed:
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _sigint)
    threading.Thread(target=_watch, args=(read_end,), name="cutover-signals", daemon=True).start()
    _installed = True


@contextmanager
def graceful(stop: threading.Event, in_flight: Callable[[], str | None]) -> Iterator[threading.Event]:
    """SIGINT and SIGTERM ask `stop` for a clean stop (the work in flight is finished) instead of raising."""
    global _graceful
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # an ignored SIGINT stays ignored
    taken = [signal.SIGTERM] + ([] if ignored else [signal.SIGINT])
    before = {s: signal.signal(s, _ignore) for s in taken}
    _graceful = _Graceful(stop, in_flight)
    try:
        yield stop
    finally:
        _graceful = None
        for s, h in before.items():
            signal.signal(s, h)


@contextmanager
def cleaning() -> Iterator[None]:
    """Work an interrupt must not cut short (stopping processes just started): the deadline waits for it."""
    global _cleaning
    with _lock:
        _cleaning += 1
    try:
        yield
    finally:
        with _lock:
            _cleaning -= 1


def bound(seconds: float, command: str) -> None:
    """End the process with exit 1 if the command still runs `seconds` (and SAY_WHY, GRACE) from now.
    Only for a command run by `main()`: parsing a command elsewhere arms nothing."""
    if not _active:
        return

    def late() -> None:
        _exit(ExitCode.ERROR, f"error: {command} did not finish within its --timeout of {exact(seconds)}s: a cluster, "
                              "the catalog or the storage did not answer in time\n  fix: run cutover plan check to "
                              "see which one, or give a longer --timeout")

    global _backstop_at
    _backstop_at = time.monotonic() + seconds + GRACE + SAY_WHY
    _timers.append(_daemon_timer(seconds + GRACE + SAY_WHY, late))


def unbound() -> None:
    """The command turned out to run until it is stopped (`status --watch`): its --timeout bounds each reading,
    no longer the whole command."""
    global _backstop_at
    _backstop_at = None
    while _timers:
        _timers.pop().cancel()


def disarm() -> None:
    """The command returned: no deadline applies any more, and the watcher stands down (an in-process
    caller goes on living)."""
    global _active, _interrupts, _backstop_at
    _active, _interrupts, _backstop_at = False, 0, None
    while _timers:
        _timers.pop().cancel()


def exit_now(code: int) -> None:
    """End the process now from the main thread, flushing what was written (threads stuck in a client
    are not waited for)."""
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(int(code))


def _daemon_timer(seconds: float, fn: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, fn)
    timer.daemon = True
    timer.start()
    return timer


def _sigint(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def _ignore(_signum: int, _frame: Any) -> None:
    """The watcher handles the signal; Python's handler must only not raise or exit."""


def _watch(read_end: int) -> None:
    global _interrupts
    while True:
        try:
            data = os.read(read_end, 64)
        except OSError:
            return
        for signum in data:
            if not _active:
                continue  # no command runs: Python's own handling (KeyboardInterrupt) is enough
            if signum == signal.SIGINT:
                _interrupts += 1
                _on_interrupt(_interrupts)
            elif signum == signal.SIGTERM and _graceful is not None:
                _ask("SIGTERM", _graceful)


def _ask(name: str, g: _Graceful) -> None:
    if g.stop.is_set():
        return
    from cutover.output import progress

    doing = g.in_flight()
    progress(f"{name}: finishing {doing}, then stopping" if doing else f"{name}: stopping (nothing in flight to "
             "finish)")
    g.stop.set()


def _on_interrupt(count: int) -> None:
    g = _graceful
    if count > 1:
        _exit(ExitCode.INTERRUPTED, "interrupted: stopped at once" + _left(g))
    if g is not None:
        _ask("SIGINT", g)
    _timers.append(_daemon_timer(GRACE, lambda: _late(g)))


def _late(g: _Graceful | None) -> None:
    if not _active:
        return
    if _cleaning:  # stopping what was just started, restoring a fault: a second Ctrl-C still ends it at once
        _timers.append(_daemon_timer(0.2, lambda: _late(g)))
        return
    _exit(ExitCode.INTERRUPTED, f"interrupted: did not end within {exact(GRACE)}s of Ctrl-C, stopped" + _left(g))


def _left(g: _Graceful | None) -> str:
    doing = g.in_flight() if g is not None else None
    if not doing:
        return ""
    return (f"; {doing} was not finished: nothing of it is kept, and the next run starts again after the last "
            "committed work")


def _exit(code: int, message: str) -> None:
    """From the watcher: never flush stdout (the main thread may hold its lock, blocked on a full pipe)."""
    with suppress(OSError):
        os.write(2, (message + "\n").encode())
    os._exit(int(code))
