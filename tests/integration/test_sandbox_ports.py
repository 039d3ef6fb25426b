"""A port taken between choosing and binding: another is chosen. `down` stops only its own."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from cutover.local import sandbox as sandbox_mod
from cutover.local.sandbox import Sandbox
from tests.conftest import cutover


def test_taken_port_moves_the_cluster_and_down_touches_nothing_else(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
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
    squatter.settimeout(1)
    probe = socket.create_connection(("127.0.0.1", taken), timeout=1)  # the squatter still listens
    probe.close()
    squatter.close()
    assert (box.dir / "old" / "data").is_dir(), "down keeps the data unless --purge"
    purge = cutover("local", "down", "--purge", "--dir", str(box.dir))
    assert purge.code == 0 and not box.dir.exists()
