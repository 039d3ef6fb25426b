"""The migration plan: load, interpolate ${ENV}, validate, and hand out typed data."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cutover import secrets
from cutover.errors import PlanError, UsageError
from cutover.plan.model import CATALOG_URIS, REGISTRY_FORMATS, ClusterSide, Plan, PlanSpec, TablePair
from cutover.plan.reader_kinds import READER_KINDS
from cutover.plan.schema import Builder
from cutover.plan.source import PathKey, interpolate, read_document, read_env_file

__all__ = ["ClusterSide", "Plan", "PlanSpec", "TablePair", "derive", "load_plan", "select_pairs"]

log = logging.getLogger("cutover.plan")


def load_plan(file: str | Path, environ: dict[str, str] | None = None) -> Plan:
    """Read and validate a plan. Raises PlanError listing every problem found."""
    path = Path(file).expanduser().absolute()
    doc = read_document(path)
    if not isinstance(doc.data, dict):
        raise PlanError([f"{path}: the plan must be a mapping of keys (found {type(doc.data).__name__})"])

    env = dict(os.environ if environ is None else environ)
    env_file = doc.data.get("env_file")
    if isinstance(env_file, str):
        env_path = Path(env_file).expanduser()
        env_path = env_path if env_path.is_absolute() else path.parent / env_path
        if env_path.is_dir():
            raise PlanError([f"{doc.where(('env_file',))}: {env_path} is a folder, not a file of NAME=value lines "
                             "(fix: name the file in it, or remove env_file)"])
        if not env_path.is_file():
            raise PlanError([f"{doc.where(('env_file',))}: file {env_path} not found "
                             "(fix: create it, or remove env_file)"])
        env = {**read_env_file(env_path), **env}  # the real environment wins

    problems = interpolate(doc, env)
    builder = Builder(doc)
    spec = builder.build(PlanSpec, doc.data, ())
    problems += builder.problems
    if spec is not None and not problems:
        problems += _cross_checks(spec, doc.where)
    if problems:
        raise PlanError(problems)
    for side in ("old", "new"):
        secrets.register_config(getattr(spec.clusters, side))
    secrets.register_config(spec.catalog.properties if spec.catalog else {})
    if spec.registry is not None:
        for side in ("old", "new"):
            registry = getattr(spec.registry, side)
            secrets.register_config(registry)
            user_info = registry.get("basic.auth.user.info", "")
            secrets.register(user_info.partition(":")[2])
    log.info("plan %s read from %s: clusters %s -> %s, %d table pair(s)%s", spec.name, path,
             spec.clusters.old.get("bootstrap.servers"), spec.clusters.new.get("bootstrap.servers"), len(spec.tables),
             f", variables from {env_file}" if isinstance(env_file, str) else "")
    return Plan(spec=spec, file=path)


def variables(plan: Plan) -> dict[str, str]:
    """The variables the plan's ${VAR}s read: its env file's, the real environment's winning."""
    env = dict(os.environ)
    if plan.spec.env_file:
        env_path = Path(plan.spec.env_file).expanduser()
        env_path = env_path if env_path.is_absolute() else plan.base_dir / env_path
        if env_path.is_file():
            env = {**read_env_file(env_path), **env}
    return env


def derive(source: Path, path: Path, merge: bool = False, **changes: Any) -> Plan:
    """Write and load a plan made from another plan file with some top-level keys replaced.

    With `merge`, a change that is a mapping is merged into the section it names (the
    source's other keys there stay). `env_file` is made absolute, so the new file may live
    anywhere; a change to None drops the key. `path` may be `source` itself.
    """
    import yaml

    data = yaml.safe_load(source.read_text())
    if data.get("env_file"):
        data["env_file"] = str((source.parent / data["env_file"]).resolve())
    for key, value in changes.items():
        old = data.get(key)
        data[key] = {**old, **value} if merge and isinstance(value, dict) and isinstance(old, dict) else value
    path.parent.mkdir(parents=True, exist_ok=True)
    plain = _plain({k: v for k, v in data.items() if v is not None})
    path.write_text(yaml.safe_dump(plain, sort_keys=False))
    return load_plan(path)


def _plain(value: Any) -> Any:
    """YAML-safe values: parsed ones (a Duration is a float subclass) back to plain types."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return float(value)
    return value


def _cross_checks(spec: PlanSpec, where: Callable[[PathKey], str]) -> list[str]:
    """Rules that span fields: required client properties, unique table names."""
    problems: list[str] = []
    for side in ("old", "new"):
        props = getattr(spec.clusters, side)
        if not props.get("bootstrap.servers"):
            problems.append(f"{where(('clusters', side))}: 'bootstrap.servers' is required "
                            "(fix: host:port of one or more brokers, comma-separated)")
        else:
            problems += [f"{where(('clusters', side, 'bootstrap.servers'))}: {p}" for p in
                         _bootstrap_problems(str(props["bootstrap.servers"]))]
        problems += [f"{where(('clusters', side))}: {p}" for p in _client_problems(props)]
    if spec.tables and spec.catalog is None:
        problems.append(f"{where(('tables',))}: {len(spec.tables)} table pair(s) and no catalog section: the shadow, "
                        "verify, status and promote reach the tables through the plan's Iceberg catalog (fix: add "
                        f"catalog: {{uri: ...}}, e.g. {CATALOG_URIS}; or remove tables to move topics only)")
    if spec.catalog is not None:
        problems += [f"{where(('catalog', 'uri'))}: {p}" for p in _catalog_problems(spec.catalog.type,
                                                                                   spec.catalog.uri)]
    shared = _brokers(spec.clusters.old) & _brokers(spec.clusters.new)
    if shared:
        problems.append(f"{where(('clusters', 'new'))}: 'bootstrap.servers' names {', '.join(sorted(shared))}, as "
                        "clusters.old does: old and new must be two clusters (fix: give the new cluster's brokers)")
    seen: dict[str, PathKey] = {}
    for i, t in enumerate(spec.tables):
        for key in ("old", "new"):
            name = getattr(t, key)
            if name in seen:
                problems.append(f"{where(('tables', i, key))}: table {name} is already used at "
                                f"{where(seen[name]).split(': ', 1)[1]} (fix: each table appears once)")
            seen[name] = ("tables", i, key)
        if t.format != "json" and t.schema:
            problems.append(f"{where(('tables', i, 'schema'))}: a schema only applies to format json (fix: remove "
                            "schema, or set format: json)")
        registry_formats = [f"{k} {v}" for k, v in (("format", t.format), ("key_format", t.key_format))
                            if v in REGISTRY_FORMATS]
        if registry_formats and spec.registry is None:
            problems.append(f"{where(('tables', i))}: {' and '.join(registry_formats)} need a schema registry, and "
                            "the plan has no registry section (fix: add registry: {old: {url: ...}, new: {url: ...}})")
    names: dict[str, int] = {}
    for i, r in enumerate(spec.readers):
        if r.name in names:
            problems.append(f"{where(('readers', i, 'name'))}: reader {r.name} is already declared at "
                            f"{where(('readers', names[r.name], 'name')).split(': ', 1)[1]} (fix: give each reader "
                            "its own name)")
        names.setdefault(r.name, i)
        entry = READER_KINDS[r.kind]
        needs = entry.needs + tuple(key for (field, value), more in entry.needs_when.items()
                                    if getattr(r, field) == value for key in more)
        for key in needs:
            if getattr(r, key) is None:
                problems.append(f"{where(('readers', i))}: a {r.kind} reader needs {key} (fix: add "
                                f"{key}: ... to reader {r.name})")
        own = {*entry.needs, *entry.may}
        foreign = [key for kind, other in READER_KINDS.items() if kind != r.kind for key in (*other.needs, *other.may)
                   if key not in own]
        for key in dict.fromkeys(foreign):
            if getattr(r, key) is not None:
                problems.append(f"{where(('readers', i, key))}: {key} does not apply to a {r.kind} reader "
                                f"(fix: remove it from reader {r.name})")
        for key in ("state_dir", "savepoints", "start_file"):  # read and written where the application runs
            value = getattr(r, key)
            if value is not None and re.match(r"[a-z][a-z0-9+.-]*://", value, re.I) and \
                    not value.lower().startswith("file://"):
                problems.append(f"{where(('readers', i, key))}: {value} is not a local folder: cutover reads and "
                                f"writes a {r.kind} reader's {key} on this host (only a Spark checkpoint may be on "
                                "object storage) (fix: run the move where the folder is, or copy it here and back)")
    if spec.mirror.state_cluster == "old" and spec.mirror.mode != "idempotent":
        problems.append(f"{where(('mirror', 'state_cluster'))}: old needs mirror.mode: idempotent (fix: set mode: "
                        "idempotent, or keep the state on the new cluster: a transaction covers records and "
                        "progress on one cluster only)")
    return problems


def _bootstrap_problems(value: str) -> list[str]:
    """What is wrong with a bootstrap.servers list: each entry must be host:port."""
    out = []
    for part in (p.strip() for p in value.split(",")):
        if "://" in part and not part.lower().startswith(("plaintext://", "ssl://", "sasl_plaintext://",
                                                          "sasl_ssl://")):
            out.append(f"{part!r} is a URL; bootstrap.servers is host:port, comma-separated (fix: "
                       f"{part.split('://', 1)[1].rstrip('/')})")
        elif ";" in part or " " in part:
            out.append(f"{part!r} is not host:port (fix: separate brokers with commas, e.g. b1:9092,b2:9092)")
        elif part and not re.fullmatch(r"(?:[a-z_]+://)?(\[[0-9a-f:.]+\]|[^:\[\]]+):\d{1,5}", part, re.I):
            out.append(f"{part!r} is not host:port (fix: give the port too, e.g. {part.rsplit(':', 1)[0]}:9092)")
        elif part and not 0 < int(part.rsplit(":", 1)[1]) < 1 << 16:  # librdkafka would take it modulo 65536
            out.append(f"{part!r}: port {int(part.rsplit(':', 1)[1])} is not a TCP port (fix: 1 to 65535, the "
                       "brokers' listener port)")
    return out


def _client_problems(props: dict[str, str]) -> list[str]:
    """Client properties librdkafka itself refuses (an unknown name, a value out of its set), asked without
    connecting: the properties are tried on a client given no brokers."""
    from confluent_kafka import KafkaException, Producer

    trial: dict[str, Any] = {k: v for k, v in props.items() if k != "bootstrap.servers"
                             and not str(v).startswith("${") and not k.endswith((".location", ".pem", ".keytab"))}
    # (files: tls.check_files names those)
    trial["logger"] = logging.getLogger("cutover.kafka.librdkafka")  # not librdkafka's own stderr
    try:
        Producer(trial).flush(0)
    except KafkaException as exc:
        text = re.sub(r"^Failed to create \w+: ", "", str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str")
                                                        else exc))
        combination = _refused_combination(text, props)
        if combination is not None:
            return combination
        if not text.startswith(("No such configuration property", "Invalid value", "Unsupported value")):
            return []  # the connection names what else it refuses, with the fix
        hint = ""
        name = re.search(r"No such configuration property: \"([^\"]+)\"", text)
        if name:
            import difflib

            close = difflib.get_close_matches(name.group(1), _KNOWN_PROPERTIES, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
        if "security.protocol" in text:
            hint += " (one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
        return [f"librdkafka refuses these client properties: {text}{hint} (fix: see librdkafka's CONFIGURATION.md)"]
    except (TypeError, ValueError) as exc:
        return [f"librdkafka refuses these client properties: {exc} (fix: see librdkafka's CONFIGURATION.md)"]
    return []


#: The SASL mechanisms librdkafka knows (sasl.mechanism).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")


def _refused_combination(text: str, props: dict[str, str]) -> list[str] | None:
    """The SASL settings librdkafka refuses as they stand, named with the fix: a mechanism it does not know, a
    user or password that is empty (a variable set to nothing); None for anything else."""
    if text.startswith("Unsupported SASL mechanism"):
        return [f"librdkafka refuses these client properties: {text} (fix: sasl.mechanism is one of "
                f"{', '.join(SASL_MECHANISMS)}, and one the brokers' listener offers)"]
    empty = [k for k in ("sasl.username", "sasl.password") if k in props and not str(props[k])]
    if text.startswith("sasl.username and sasl.password must be set") and empty:
        return [f"SASL mechanism {props.get('sasl.mechanism', 'GSSAPI')} needs sasl.username and sasl.password: "
                f"{' and '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty (fix: the variable it comes from "
                "is set to nothing: set it, in the environment or the plan's env_file)"]
    return None  # one left out: a plan may leave a cluster's credentials to later (the connection names it)


#: Common client properties, for "did you mean".
_KNOWN_PROPERTIES = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
                     "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                     "ssl.endpoint.identification.algorithm", "client.id", "sasl.kerberos.service.name",
                     "sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
                     "sasl.oauthbearer.token.endpoint.url", "socket.timeout.ms", "request.timeout.ms",
                     "message.max.bytes", "receive.message.max.bytes", "client.rack", "ssl.ca.pem",
                     "ssl.certificate.pem", "ssl.key.pem", "enable.ssl.certificate.verification")


def _catalog_problems(kind: str, uri: str) -> list[str]:
    """A catalog URI whose scheme cannot be what the catalog's type needs."""
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else ""
    if kind == "rest":
        if scheme not in ("http", "https"):
            return [f"{uri.split('://')[0]!r}: a REST catalog's uri is http:// or https:// (fix: the REST server's "
                    "address, or type: sql for a SQLite or PostgreSQL catalog)"]
        return []
    if scheme == "sqlite":
        return []
    if scheme.startswith("postgresql"):
        return []
    if scheme in ("http", "https"):
        return ["an http(s) uri is a REST catalog's (fix: set catalog.type: rest)"]
    fixes = {"sqlite3": "sqlite:////absolute/path/catalog.db", "postgres": "postgresql+psycopg2://user@host/db",
             "jdbc:postgresql": "postgresql+psycopg2://user@host/db", "jdbc:sqlite": "sqlite:////absolute/path.db"}
    fix = fixes.get(scheme, "sqlite:////absolute/path/catalog.db or postgresql+psycopg2://user@host:5432/db")
    return [f"scheme {scheme or '(none)'!r} is not a SQL catalog's (fix: {fix})"]


def _brokers(props: dict[str, str]) -> set[str]:
    """The host:port pairs of bootstrap.servers, normalised (no scheme, lower case)."""
    out = set()
    for part in props.get("bootstrap.servers", "").split(","):
        part = part.strip().lower()
        if "://" in part:
            part = part.split("://", 1)[1]
        if part:
            out.add(part)
    return out


def select_pairs(plan: Plan, which: str | None) -> list[TablePair]:
    """The table pairs a command works on: all, or the one whose topic or table (old or new) is `which`."""
    pairs = plan.spec.tables
    if not pairs:
        raise UsageError(f"{plan.file}: tables: the plan has no table pairs",
                         fix="add a tables section (see samples/plan.yaml)")
    if which is None:
        return list(pairs)
    chosen = [p for p in pairs if which in (p.topic, p.new, p.old)]
    if not chosen:
        raise UsageError(f"--table {which}: no table pair in {plan.file} has this topic or table",
                         fix="use one of: " + ", ".join(p.new for p in pairs))
    return chosen
