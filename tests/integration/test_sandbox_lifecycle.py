"""Sandbox lifecycle edges: a port taken between choosing and binding (another is
chosen), `down` stopping only its own processes, and an interrupted `up`."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cutover.local import sandbox as sandbox_mod
from cutover.local.sandbox import Sandbox
from tests.conftest import cutover, wait_for


def test_taken_port_moves_the_cluster_and_down_touches_nothing_else(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    # It accepts and closes what connects (the sandbox's readiness checks do, while the broker fails to bind): a
    # loaded CI run's checks once filled its backlog, and the test's own probe below then timed out.
    drained = threading.Event()

    def drain() -> None:
        squatter.settimeout(0.2)
        while not drained.is_set():
            with contextlib.suppress(OSError):
                squatter.accept()[0].close()

    threading.Thread(target=drain, daemon=True).start()
    real_free_port = sandbox_mod.free_port
    handed_out: list[int] = []

    def first_a_taken_port() -> int:
        port = taken if not handed_out else real_free_port()
        handed_out.append(port)
        return port

    monkeypatch.setattr(sandbox_mod, "free_port", first_a_taken_port)
    box = Sandbox(tmp_path / "sb")
    try:
        status = box.up()
        assert status["old"]["running"] and status["new"]["running"]
        assert status["old"]["bootstrap"] != f"127.0.0.1:{taken}"
        assert "Address already in use" in (box.dir / "old" / "broker.log").read_text()
        pids = [status[s]["pid"] for s in ("old", "new")]
    finally:
        down = cutover("local", "down", "--dir", str(box.dir), "-o", "json")
    assert down.code == 0 and down.json()["stopped"] == ["old", "new"]
    for pid in pids:
        cmdline = Path(f"/proc/{pid}/cmdline")
        assert not cmdline.exists() or b"server.properties" not in cmdline.read_bytes()
    probe = socket.create_connection(("127.0.0.1", taken), timeout=5)  # the squatter still listens
    probe.close()
    drained.set()
    squatter.close()
    assert (box.dir / "old" / "data").is_dir(), "down keeps the data unless --purge"
    purge = cutover("local", "down", "--purge", "--dir", str(box.dir))
    assert purge.code == 0 and not box.dir.exists()


def _processes_mentioning(*texts: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if all(t.encode() in cmdline.read_bytes() for t in texts):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_interrupted_up_exits_130_and_leaves_no_broker_behind(tmp_path: Path) -> None:
    folder = tmp_path / "sb"
    log = folder / "old" / "broker.log"
    proc = subprocess.Popen([sys.executable, "-m", "cutover", "local", "up", "--dir", str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _processes_mentioning("kafka.Kafka", str(folder / "old" / "server.properties")), 120,
                 "the old broker to be launched")
        assert "Kafka Server started" not in log.read_text(), "interrupt must land while the broker starts"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.rstrip().endswith("interrupted") and "Traceback" not in err
    assert out == ""
    assert _processes_mentioning(str(folder)) == []
