"""A real application the tests run (a Kafka Streams or Flink program on the JVM): its JSON lines on
stdout kept as they come, its stderr in a log, its stdin the tests' way to tell it to stop."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any


class AppProcess:
    def __init__(self, cmd: list[str], log: Path) -> None:
        self.lines: list[dict[str, Any]] = []
        self.log = log
        with log.open("ab") as err:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.append(json.loads(line))

    def running(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        return True

    def end(self, say: str = "", timeout: float = 180) -> None:
        """Write `say` and close its stdin; it must exit 0 within `timeout`; every line is read after."""
        assert self.proc.stdin is not None
        if say:
            self.proc.stdin.write(say)
        self.proc.stdin.close()
        assert self.proc.wait(timeout) == 0, self.log.read_text()[-3000:]
        self._reader.join(30)  # its stdout ended: every line is read


def reader_plan(sandbox_plan: Path, tmp: Path, ns: str, reader: dict[str, Any], hook_env: str = "",
                **more_hooks: str) -> Path:
    """A plan of the sandbox's clusters for one reader's switch: the test's topics and groups (ns.*), quick
    group syncs and quiet period, and stop_reader/start_reader hooks that log "stop CLUSTER READER ..." and
    "start ACTIVE READER ..." (with `hook_env`, more of their environment) in tmp/hooks.log; `more_hooks`:
    event -> a shell script's body."""
    from cutover.plan import derive

    log = tmp / "hooks.log"
    said = f'"$CUTOVER_READER{" " + hook_env if hook_env else ""}"'
    hooks = {"stop_reader": _script(tmp / "stop", f'echo "stop $CUTOVER_CLUSTER" {said} >> "{log}"\n'),
             "start_reader": _script(tmp / "start", f'echo "start $CUTOVER_ACTIVE" {said} >> "{log}"\n'),
             **{event: _script(tmp / event, body) for event, body in more_hooks.items()}}
    return derive(sandbox_plan, tmp / f"{ns}.yaml", merge=True, name=ns,
                  topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}\\..*"]},
                  mirror={"group_sync_interval": "1s"}, gates={"quiet_period": "2s"},
                  switch={"journal_dir": str(tmp / "journal"), "quiet_timeout": "60s"},
                  routing={"file": str(tmp / "routing.json")}, hooks=hooks, tables=[], readers=[reader]).file


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)
