"""Peak resident memory of a process tree (psutil), sampled while a measure runs: cutover's own processes,
the Spark driver's JVM included (a child of the process that started it)."""

from __future__ import annotations

import threading
from types import TracebackType

import psutil


class PeakRss:
    """`with PeakRss(pid) as peak: ...`; then `peak.mb`: the highest sum of RSS over the process and its
    descendants seen, sampled every `every` seconds."""

    def __init__(self, pid: int, every: float = 0.25) -> None:
        self.pid, self.every, self.peak = pid, every, 0
        self._stop = threading.Event()
        self._sampled = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def mb(self) -> float:
        return round(self.peak / 2**20, 1)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(10)

    def wait_sample(self, timeout: float = 5.0) -> None:
        """Until the next sample is taken (or `timeout` seconds)."""
        with self._sampled:
            self._sampled.wait(timeout)

    def _run(self) -> None:
        while True:
            self.peak = max(self.peak, tree_rss(self.pid))
            with self._sampled:
                self._sampled.notify_all()
            if self._stop.wait(self.every):
                return


def tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue  # it ended between the listing and the reading
    return total
