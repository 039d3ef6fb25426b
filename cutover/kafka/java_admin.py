"""Kafka's Java Admin API for what librdkafka (and so confluent-kafka) does not offer: a small program of
cutover/java/ (compiled once by cutover.jvm.program) runs with Kafka's client jars on the class path. Its
client properties (secrets among them) go in a private file that is removed at once;
its errors come back named, scrubbed of secrets."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from cutover import jvm
from cutover.errors import CutoverError, RightsDenied, UnreachableError
from cutover.kafka.clients import ClusterRef
from cutover.kafka.java_client import java_properties
from cutover.secrets import scrub

_DENIED = ("ClusterAuthorizationException", "AuthorizationException", "SaslAuthenticationException",
           "SslAuthenticationException")


def run(program: Path, ref: ClusterRef, args: list[str], doing: str, timeout: float, denied_fix: str) -> str:
    """The program's stdout; RightsDenied (fix: `denied_fix`) when the cluster refused the principal,
    UnreachableError for anything else."""
    props = java_properties(ref.name, ref.properties)
    props.setdefault("request.timeout.ms", str(int(timeout * 1000)))
    props.setdefault("default.api.timeout.ms", str(int(timeout * 1000)))
    with tempfile.TemporaryDirectory(prefix="cutover-admin-") as folder:  # 0700: the file holds secrets
        config = Path(folder) / "client.properties"
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(jvm.properties_text(props))
        cmd = [jvm.java(), "-Xmx256m", *jvm.LEAN, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               *jvm.program(program, jvm.resolve(jvm.KAFKA_BROKER)), str(config), *args]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 60, check=False)
        except subprocess.TimeoutExpired:
            raise UnreachableError(f"{ref.describe()} did not answer within {timeout:.0f}s while {doing}",
                                   fix="check that the cluster is up and reachable") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        # The program's own error is its last line; a program Java could not compile names why first.
        last = scrub(next((ln for ln in lines if ": error: " in ln), lines[-1]))
        error: CutoverError
        if any(d in last for d in _DENIED):
            error = RightsDenied(f"{ref.describe()} refused cutover's principal while {doing}: {last}",
                                 fix=denied_fix)
        else:
            error = UnreachableError(f"{ref.describe()}: {doing} failed: {last}",
                                     fix="check that the cluster is up and reachable, and its client properties")
        raise error
    return done.stdout
