"""`cutover init`: a commented plan written from answers, validated before it is written.

Pure text in, text out: `render` makes the YAML (every value quoted as JSON, which YAML
reads as it is), with a comment on each section saying what it does and where the full
reference is (samples/plan.yaml). Passwords are never asked for and never written: the
plan refers to an environment variable (`${OLD_KAFKA_PASSWORD}`) the user sets, or puts
in an env_file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from cutover.errors import UsageError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True)
class Cluster:
    bootstrap: str
    security: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    user: str | None = None
    password_var: str | None = None
    ca: str | None = None

    def properties(self) -> dict[str, str]:
        props = {"bootstrap.servers": self.bootstrap}
        if self.security != "PLAINTEXT":
            props["security.protocol"] = self.security
        if self.security.startswith("SASL"):
            props.update({"sasl.mechanism": self.mechanism, "sasl.username": self.user or ""})
        if self.security.endswith("SSL") and self.ca:
            props["ssl.ca.location"] = self.ca
        return props


@dataclass(frozen=True)
class Table:
    topic: str
    old: str
    new: str

    @classmethod
    def parse(cls, text: str) -> Table:
        """`TOPIC=OLD_TABLE:NEW_TABLE`, e.g. `orders=legacy.orders:cutover.orders`."""
        m = re.fullmatch(r"([^=]+)=([^:]+):([^:]+)", text.strip())  # each name then validated as the plan's
        if m is None:
            raise UsageError(f"--pair {text!r}: expected TOPIC=OLD_TABLE:NEW_TABLE",
                             fix="e.g. --pair orders=legacy.orders:cutover.orders (tables as namespace.table)")
        return cls(*(g.strip() for g in m.groups()))


@dataclass(frozen=True)
class S3:
    """Where the warehouse's files live on S3-compatible storage, and how to reach it."""

    location: str  # s3://bucket/prefix
    endpoint: str | None = None  # None: AWS S3 itself
    region: str | None = None
    path_style: bool = False
    #: the environment variables holding the keys (None: the AWS SDK's own chain: its variables, a profile, a role)
    key_var: str | None = "S3_ACCESS_KEY"
    secret_var: str | None = "S3_SECRET_KEY"

    def variables(self) -> list[str]:
        return [v for v in (self.key_var, self.secret_var) if v]

    def properties(self) -> list[tuple[str, str, str]]:
        """(key, value as YAML, comment) for catalog.properties."""
        out = []
        if self.endpoint:
            out.append(("s3.endpoint", _q(self.endpoint), "an S3-compatible server (leave out for AWS S3)"))
        if self.key_var and self.secret_var:
            out += [("s3.access-key-id", f'"${{{self.key_var}}}"', "from the environment or env_file, never here"),
                    ("s3.secret-access-key", f'"${{{self.secret_var}}}"', "")]
        if self.path_style:
            out.append(("s3.path-style-access", '"true"', "bucket in the path, as most S3-compatible servers want"))
        if self.region:
            out.append(("s3.region", _q(self.region), ""))
        return out


@dataclass(frozen=True)
class Answers:
    name: str
    old: Cluster
    new: Cluster
    topics: list[str] = field(default_factory=lambda: [".*"])
    groups: list[str] = field(default_factory=lambda: [".*"])
    tables: list[Table] = field(default_factory=list)
    catalog_uri: str | None = None
    catalog_name: str = "lake"
    warehouse: str | None = None
    env_file: str | None = None
    storage: S3 | None = None

    def variables(self) -> list[str]:
        """The environment variables the plan refers to (the passwords and the storage keys)."""
        return [c.password_var for c in (self.old, self.new) if c.security.startswith("SASL") and c.password_var] \
            + (self.storage.variables() if self.storage else [])


def _q(value: str) -> str:
    """A user's value as YAML reads it back: JSON-quoted, a `$` doubled (the plan reads ${...} as a variable)."""
    return json.dumps(value.replace("$", "$$"), ensure_ascii=False)


def _cluster(side: str, c: Cluster, note: str) -> list[str]:
    lines = [f"  {side}:{note}"]
    for key, value in c.properties().items():
        lines.append(f"    {key}: {_q(value)}")
    if c.security.startswith("SASL"):
        lines.append(f'    sasl.password: "${{{c.password_var}}}"   # from the environment or env_file, never here')
    return lines


def render(a: Answers) -> str:
    """The plan's YAML text."""
    lines = [
        "# A cutover migration plan, written by `cutover init`. Every key is documented in",
        "# samples/plan.yaml; check this plan against the live clusters with:",
        "#   cutover plan check --plan <this file>",
        "# Any string may use ${ENV_VAR}: secrets stay out of this file.",
        "",
        "version: 1",
        f"name: {_q(a.name)}                 # part of transactional ids, group ids and the journal's folder",
    ]
    if a.env_file:
        lines += ["", "# KEY=VALUE lines for the ${VAR}s below (the real environment wins).",
                  f"env_file: {_q(a.env_file)}"]
    lines += ["", "# The two clusters, as Kafka client properties (librdkafka names).", "clusters:"]
    lines += _cluster("old", a.old, "   # the mirror reads here; the reverse mirror (rollback) writes here")
    lines += _cluster("new", a.new, "   # the mirror writes here (topics, transactions, group offsets)")
    lines += ["", "# What moves: regular expressions, full match (exclude wins over include).",
              "topics:", f"  include: [{', '.join(_q(t) for t in a.topics)}]",
              "groups:", f"  include: [{', '.join(_q(g) for g in a.groups)}]"]
    if a.tables:
        lines += ["", "# Topic -> table pairs: the old pipeline's table and the one `cutover shadow` writes.",
                  "tables:"]
        for t in a.tables:
            lines += [f"  - topic: {_q(t.topic)}", f"    old: {_q(t.old)}", f"    new: {_q(t.new)}",
                      "    format: json                  # json, raw or text (see samples/plan.yaml)"]
    if a.catalog_uri:
        kind = "rest" if a.catalog_uri.startswith(("http://", "https://")) else "sql"
        lines += ["", "# The Iceberg catalog, shared by pyiceberg and Spark under the same name.", "catalog:",
                  f"  name: {_q(a.catalog_name)}", f"  type: {kind}", f"  uri: {_q(a.catalog_uri)}"]
        if a.warehouse:
            lines.append(f"  warehouse: {_q(a.warehouse)}")
        if a.storage:
            lines.append(f"  storage: {_q(a.storage.location)}   # where the table files live: plan check writes a "
                         "probe object here")
            props = a.storage.properties()
            if props:
                lines.append("  properties:                     # for pyiceberg and Spark (S3FileIO) alike")
                lines += [f"    {k}: {v}" + (f"   # {note}" if note else "") for k, v, note in props]
    return "\n".join(lines) + "\n"
