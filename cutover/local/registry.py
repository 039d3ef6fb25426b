"""The sandbox's schema registries: one Apicurio Registry 2.4.2 per cluster, serving the Confluent API.

No registry server is published ready to run on the registries this project reaches
(Confluent's is not on Maven Central, Karapace is not on PyPI), so `cutover/java/apicurio/`
assembles Apicurio's Quarkus application from Maven Central once (build.sh, about 35 s) into
~/.cutover/registry. Each registry keeps its schemas in an H2 file in its folder, so it comes
back as it was after `local stop registry` / `local start registry`, and listens on 127.0.0.1.
Its Confluent API root is http://127.0.0.1:PORT/apis/ccompat/v7.
"""

from __future__ import annotations

import subprocess
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cutover import jvm
from cutover.errors import DependencyMissing, SandboxError
from cutover.local import broker
from cutover.output import progress
from cutover.plan import ClusterSide

APICURIO_VERSION = "2.4.2.Final"
READY_TIMEOUT = 90.0
SIDES: tuple[ClusterSide, ClusterSide] = ("old", "new")


def build_dir() -> Path:
    return jvm.cutover_home() / "registry" / f"apicurio-{APICURIO_VERSION}"


def ensure_built() -> Path:
    """The runnable registry (quarkus-run.jar), built from Maven Central on first use."""
    out = build_dir()
    if (out / "quarkus-run.jar").is_file():
        return out / "quarkus-run.jar"
    script = jvm.JAVA_SOURCES / "apicurio" / "build.sh"
    progress(f"building Apicurio Registry {APICURIO_VERSION} from Maven Central into {out} (first use only, ~40 s)")
    jvm.java()
    done = subprocess.run(["bash", str(script), str(out.with_suffix(".tmp"))], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise DependencyMissing("building the sandbox's schema registry failed:\n"
                                f"{(done.stdout + done.stderr)[-1500:]}",
                                fix="check that Maven reaches Maven Central (mvn -v), then run the same command again")
    if out.exists():
        import shutil

        shutil.rmtree(out)
    out.with_suffix(".tmp").rename(out)
    return out / "quarkus-run.jar"


@dataclass
class RegistryState:
    port: int
    pid: int | None = None

    @classmethod
    def load_all(cls, raw: dict[str, Any] | None) -> dict[str, RegistryState] | None:
        """The registries of a sandbox's state file (None: it runs none)."""
        return {side: cls(**r) for side, r in raw.items()} if raw else None


@dataclass(frozen=True)
class RegistrySpec:
    side: ClusterSide
    folder: Path
    port: int
    version: str = APICURIO_VERSION

    @property
    def title(self) -> str:
        return f"{self.side} schema registry (Apicurio {APICURIO_VERSION})"

    @property
    def config_file(self) -> Path:
        return self.folder / "registry.properties"

    @property
    def log_file(self) -> Path:
        return self.folder / "registry.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"


def start(spec: RegistrySpec) -> int:
    jar = ensure_built()
    spec.folder.mkdir(parents=True, exist_ok=True)
    # WRITE_DELAY=0: H2 flushes each commit at once (its default waits up to 0.5 s), so a registry killed
    # right after a registration keeps it, as the registry of a real cluster would.
    settings = {"quarkus.http.host": "127.0.0.1", "quarkus.http.port": str(spec.port),
                "quarkus.datasource.jdbc.url": f"jdbc:h2:file:{spec.folder / 'data' / 'registry'};WRITE_DELAY=0",
                "quarkus.log.console.level": "INFO"}
    spec.config_file.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    cmd = [jvm.java(), "-Xms64m", "-Xmx384m", *jvm.LEAN, f"-Dcutover.sandbox.config={spec.config_file}",
           *[f"-D{k}={v}" for k, v in settings.items()], "-jar", str(jar)]
    return broker.start_command(spec, cmd, None, lambda log: "started in" in log, READY_TIMEOUT)


def stop(spec: RegistrySpec, pid: int | None, kill: bool = False) -> bool:
    return broker.stop(spec, pid, kill)


class _Box(Protocol):
    dir: Path

    def _locked(self) -> AbstractContextManager[None]: ...
    def _load(self) -> Any: ...
    def _save(self, state: Any) -> None: ...


class RegistryServers:
    """Mixed into Sandbox: the registries' start, stop and description."""

    def registry_spec(self: _Box, side: ClusterSide, rs: RegistryState) -> RegistrySpec:
        return RegistrySpec(side, self.dir / f"registry-{side}", rs.port)

    def _ensure_registries(self, state: Any, create: bool) -> None:
        from cutover.local.ports import free_port

        if state.registries is None:
            if not create:
                return
            state.registries = {side: RegistryState(free_port()) for side in SIDES}
        for side in SIDES:
            rs = state.registries[side]
            spec = self.registry_spec(side, rs)  # type: ignore[misc]
            if not broker.running(spec, rs.pid):
                progress(f"starting the {spec.title} on {spec.url}")
                rs.pid = start(spec)
                self._save(state)  # type: ignore[attr-defined]

    def _stop_registries(self, state: Any, kill: bool = False, side: ClusterSide | None = None) -> bool:
        if state.registries is None:
            return False
        was = False
        for s in SIDES if side is None else (side,):
            rs = state.registries[s]
            spec = self.registry_spec(s, rs)  # type: ignore[misc]
            if broker.running(spec, rs.pid):
                progress(f"{'killing' if kill else 'stopping'} the {spec.title}")
            was = stop(spec, rs.pid, kill) or was
            rs.pid = None
        self._save(state)  # type: ignore[attr-defined]
        return was

    def stop_registry(self: _Box, kill: bool = False, side: ClusterSide | None = None) -> dict[str, Any]:
        with self._locked():
            state = self._load()
            _require(self, state)
            return {"part": "registry", "was_running": self._stop_registries(state, kill, side),  # type: ignore[attr-defined]
                    "killed": kill}

    def start_registry(self: _Box) -> dict[str, Any]:
        with self._locked():
            state = self._load()
            _require(self, state)
            self._ensure_registries(state, False)  # type: ignore[attr-defined]
            return self._describe_registries(state)  # type: ignore[attr-defined,no-any-return]

    def remove_registries(self: _Box) -> dict[str, Any]:
        """Stop the registries and leave them out of the sandbox and its plan (their data stays in the folder,
        for a later `up --registry`)."""
        with self._locked():
            state = self._load()
            was = self._stop_registries(state, True)  # type: ignore[attr-defined]
            state.registries = None
            self._save(state)
            self._write_plan(state)  # type: ignore[attr-defined]
            return {"part": "registry", "was_running": was, "removed": True}

    def _registry_plan(self, state: Any) -> dict[str, Any]:
        """The generated plan's registry section, when the sandbox runs registries."""
        described = self._describe_registries(state)
        return {"registry": {side: {"url": r["url"]} for side, r in described.items()}} if described else {}

    def _describe_registries(self, state: Any) -> dict[str, Any]:
        if state.registries is None:
            return {}
        out: dict[str, Any] = {}
        for side in SIDES:
            rs = state.registries[side]
            spec = self.registry_spec(side, rs)  # type: ignore[misc]
            alive = broker.running(spec, rs.pid)
            out[side] = {"url": spec.url, "port": rs.port, "running": alive, "pid": rs.pid if alive else None,
                         "log": str(spec.log_file)}
        return out


def _require(box: _Box, state: Any) -> None:
    if state.registries is None:
        raise SandboxError(f"the sandbox in {box.dir} has no schema registries",
                           fix="cutover local up --registry starts one per cluster")
