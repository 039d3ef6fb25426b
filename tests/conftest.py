"""Shared test helpers: run the real CLI, wait on conditions with deadlines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: Every JVM the tests start (brokers, Spark, Connect, the registries, Kafka's tools, the Streams application)
#: compiles with C1 only, one compiler thread, and collects with the serial collector: the tests' JVMs are
#: short-lived with small heaps, and on CI's two cores C2's compiler threads and G1's concurrent ones took a
#: large share of the CPU (test_verify.py: see contributing.md; bench/sandbox_gc_bench.py). What the tests
#: prove depends on neither. C1 alone would shrink the code cache to 48 MB, too small for a session's Spark
#: driver, so the JVM's default 240 MB is kept (cutover.jvm.LEAN). No JVM they start names another collector
#: (two would refuse to start). Set JAVA_TOOL_OPTIONS yourself to run them otherwise.
os.environ.setdefault("JAVA_TOOL_OPTIONS", " ".join(
    ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m", "-XX:CICompilerCount=1", "-XX:+UseSerialGC")))


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cutover(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> Run:
    """Run `cutover ARGS` in a subprocess, as a user would."""
    full_env = {**os.environ, **(env or {})}
    done = subprocess.run([sys.executable, "-m", "cutover", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)
    return Run(done.returncode, done.stdout, done.stderr)


@contextmanager
def answering(status: int, kind: str, body: bytes) -> Iterator[int]:
    """A real HTTP server on a loopback port that answers every GET with this status, content type and body:
    a registry that refuses, or an address that is not a registry's. Yields its port."""
    import http.server
    import threading

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield int(server.server_address[1])
        finally:
            server.shutdown()


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """Poll until condition() is truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def secret_values(sandbox_dir: Path) -> list[str]:
    """The values a sandbox keeps in its secrets.env (none may appear in any output); none
    when it has no secrets (plaintext clusters, SQLite catalog)."""
    file = sandbox_dir / "secrets.env"
    lines = file.read_text().splitlines() if file.exists() else []
    return [line.split("=", 1)[1] for line in lines if "=" in line and not line.startswith("#")]
