"""`cutover init`: write a commented plan from flags (or answers at a terminal), then check it."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from cutover.cli.options import output_option, timeout_option
from cutover.errors import UsageError
from cutover.output import Format, emit, progress


def _side_options(side: str) -> list[Any]:
    up = side.upper()
    return [
        click.option(f"--{side}-bootstrap", metavar="HOST:PORT[,...]", help=f"The {side} cluster's bootstrap servers."),
        click.option(f"--{side}-security", type=click.Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]),
                     default="PLAINTEXT", show_default=True, help=f"The {side} cluster's security.protocol."),
        click.option(f"--{side}-sasl-mechanism", type=click.Choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
                     default="SCRAM-SHA-512", show_default=True, help="With SASL: the mechanism."),
        click.option(f"--{side}-user", metavar="NAME", help="With SASL: the user (sasl.username)."),
        click.option(f"--{side}-password-var", metavar="VAR", default=f"{up}_KAFKA_PASSWORD", show_default=True,
                     help="With SASL: the environment variable holding the password (never written in the plan)."),
        click.option(f"--{side}-ca", metavar="PEM",
                     help="With SSL: the CA file that signed the brokers' certificates."),
    ]


def _decorate(f: Any) -> Any:
    for option in reversed([
        click.command("init"),
        click.option("--plan", "plan_file", default="plan.yaml", show_default=True, metavar="FILE",
                     type=click.Path(dir_okay=False), help="Where to write the plan."),
        click.option("--name", default="migration", show_default=True, help="The plan's name."),
        *_side_options("old"), *_side_options("new"),
        click.option("--topics", "topics", multiple=True, metavar="REGEX",
                     help="Topics that move (repeatable; full match). Default: all."),
        click.option("--groups", "groups", multiple=True, metavar="REGEX",
                     help="Consumer groups that move (repeatable; full match). Default: all."),
        click.option("--pair", "tables", multiple=True, metavar="TOPIC=OLD:NEW",
                     help="A topic's old table and the table cutover shadow writes (repeatable), e.g. "
                          "orders=legacy.orders:cutover.orders."),
        click.option("--catalog-uri", metavar="URI", help="The Iceberg catalog: http(s)://... (REST) or a SQL "
                     "URI (sqlite:///..., postgresql+psycopg2://...)."),
        click.option("--catalog-name", default="lake", show_default=True, help="The catalog's name (also Spark's)."),
        click.option("--warehouse", metavar="LOCATION", help="The catalog's warehouse (s3://..., file:///...)."),
        click.option("--storage", metavar="s3://BUCKET/PREFIX", help="Where the warehouse's files live on S3 "
                     "(default: --warehouse when it is s3://)."),
        click.option("--s3-endpoint", metavar="URL", help="An S3-compatible server's endpoint (leave out for AWS S3)."),
        click.option("--s3-region", metavar="REGION", help="The storage's region."),
        click.option("--s3-path-style", is_flag=True, help="Bucket in the path (most S3-compatible servers)."),
        click.option("--s3-key-var", metavar="VAR", default="S3_ACCESS_KEY", show_default=True,
                     help="The variable holding the access key id; '' for the AWS SDK's own chain (role, profile)."),
        click.option("--s3-secret-var", metavar="VAR", default="S3_SECRET_KEY", show_default=True,
                     help="The variable holding the secret access key."),
        click.option("--env-file", metavar="FILE", help="A KEY=VALUE file for the plan's ${VAR}s (the passwords)."),
        click.option("--force", is_flag=True, help="Overwrite FILE if it exists."),
        click.option("--no-check", is_flag=True, help="Only write the plan; do not run plan check on it."),
        output_option, timeout_option(whole=False),
    ]):
        f = option(f)
    return f


def _ask(value: str | None, flag: str, question: str) -> str:
    if value:
        return value
    if sys.stdin.isatty():
        return str(click.prompt(question, err=True))
    raise UsageError(f"cutover init needs {flag}", fix=f"give {flag}, or run cutover init at a terminal to be asked")


@_decorate
def init_cmd(plan_file: str, name: str, topics: tuple[str, ...], groups: tuple[str, ...], tables: tuple[str, ...],
             catalog_uri: str | None, catalog_name: str, warehouse: str | None, storage: str | None,
             s3_endpoint: str | None, s3_region: str | None, s3_path_style: bool, s3_key_var: str, s3_secret_var: str,
             env_file: str | None, force: bool, no_check: bool, fmt: Format, timeout: float, **sides: Any) -> int:
    """Write a commented migration plan from these answers, then run plan check on it.

    Missing bootstrap servers are asked for at a terminal. Passwords are never asked for
    nor written: the plan names an environment variable (--old-password-var). Exit codes
    are plan check's: 0 ready, 1 something did not answer, 3 not ready (or not checked
    because a password variable is not set); 2 for bad answers (nothing is written), or
    for a written plan that cannot be checked yet (the message says why).
    """
    from cutover.errors import PlanError
    from cutover.observe import probe
    from cutover.plan import load_plan
    from cutover.plan.init import S3, Answers, Cluster, Table

    target = Path(plan_file)
    if target.exists() and not force:
        raise UsageError(f"{target} already exists", fix="give another --plan FILE, or --force to overwrite it")
    if not target.parent.is_dir():
        raise UsageError(f"--plan {target}: the folder {target.parent} does not exist", fix="create it first")
    if env_file is not None:  # the plan reads it relative to its own folder: written as an absolute path
        if not Path(env_file).is_file():
            raise UsageError(f"--env-file {env_file}: no such file", fix="create it (KEY=VALUE lines), or leave it out")
        env_file = str(Path(env_file).resolve())
    _variable_names(sides, s3_key_var, s3_secret_var)
    clusters = {}
    for side in ("old", "new"):
        security = sides[f"{side}_security"]
        user = sides[f"{side}_user"]
        _contradictions(side, security, user, sides[f"{side}_ca"])
        if security.startswith("SASL"):
            user = _ask(user, f"--{side}-user", f"{side} cluster SASL user")
        clusters[side] = Cluster(
            bootstrap=_ask(sides[f"{side}_bootstrap"], f"--{side}-bootstrap", f"{side} cluster bootstrap servers"),
            security=security, mechanism=sides[f"{side}_sasl_mechanism"], user=user,
            password_var=sides[f"{side}_password_var"],
            ca=str(Path(sides[f"{side}_ca"]).resolve()) if sides[f"{side}_ca"] else None)
    location = storage or (warehouse if warehouse and warehouse.startswith(("s3://", "s3a://")) else None)
    if storage and warehouse and warehouse.startswith(("file:", "/")):
        raise UsageError(f"--warehouse {warehouse} is a local folder, and --storage {storage} is on S3: the files "
                         "would go to one place and be looked for in the other",
                         fix="give an s3:// --warehouse under the same bucket, or leave --storage out")
    if location is not None and not location.startswith(("s3://", "s3a://")):
        raise UsageError(f"--storage {location}: not an s3:// location", fix="give s3://BUCKET/PREFIX")
    if location is None and (s3_endpoint or s3_region or s3_path_style):
        raise UsageError("--s3-endpoint, --s3-region and --s3-path-style need S3 storage",
                         fix="give --storage s3://BUCKET/PREFIX (or an s3:// --warehouse)")
    if location is not None and not catalog_uri:
        raise UsageError("--storage needs a catalog", fix="give --catalog-uri too")
    if bool(s3_key_var) != bool(s3_secret_var):
        raise UsageError("--s3-key-var and --s3-secret-var go together",
                         fix="give both, or both as '' for the AWS SDK's own credentials")
    s3 = S3(location, s3_endpoint, s3_region, s3_path_style, s3_key_var or None, s3_secret_var or None) \
        if location else None
    answers = Answers(name=name, old=clusters["old"], new=clusters["new"], topics=list(topics) or [".*"],
                      groups=list(groups) or [".*"], tables=[Table.parse(t) for t in tables],
                      catalog_uri=catalog_uri, catalog_name=catalog_name, warehouse=warehouse, env_file=env_file,
                      storage=s3)
    if answers.tables and not catalog_uri:
        raise UsageError("--pair needs a catalog", fix="give --catalog-uri (and --warehouse) too")
    text = _render_checked(answers, target)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)
    progress(f"wrote {target}")
    missing = [v for v in answers.variables() if v not in os.environ and not env_file]
    if no_check or missing:
        result = {"plan": str(target), "written": True, "checked": False,
                  "note": "not checked: set " + ", ".join(missing) + " (or give --env-file), then run cutover plan "
                          f"check --plan {target}" if missing else "not checked (--no-check)"}
        emit(result, fmt, lambda r: f"wrote {r['plan']}; {r['note']}")
        return 3 if missing and not no_check else 0
    try:
        report = probe.check(load_plan(target), timeout)
    except PlanError as exc:  # e.g. an env file that does not define a variable the plan uses
        raise UsageError(f"wrote {target}, but it cannot be checked yet: {exc.message}",
                         fix=f"fix that, then run cutover plan check --plan {target}") from None
    emit({"plan": str(target), "written": True, "checked": True, "check": report}, fmt,
         lambda r: f"wrote {r['plan']}; plan check:\n" + probe.render(r["check"]))
    return probe.exit_code(report)


def _variable_names(sides: dict[str, Any], s3_key_var: str, s3_secret_var: str) -> None:
    """The flags that name an environment variable: the plan writes ${NAME}, so each must be a name (an empty
    storage key variable means the AWS SDK's own chain; a SASL password needs its variable)."""
    given = [(f"--{side}-password-var", sides[f"{side}_password_var"], f"{side.upper()}_KAFKA_PASSWORD")
             for side in ("old", "new") if sides[f"{side}_security"].startswith("SASL")]
    given += [(flag, value, default) for flag, value, default in (("--s3-key-var", s3_key_var, "S3_ACCESS_KEY"),
                                                                 ("--s3-secret-var", s3_secret_var, "S3_SECRET_KEY"))
              if value]
    for flag, value, default in given:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value or ""):
            raise UsageError(f"{flag} {value or ''!r}: not an environment variable name (the plan reads the value "
                             "from it; nothing was written)",
                             fix=f"letters, digits and _, not starting with a digit, e.g. {default}")


def _contradictions(side: str, security: str, user: str | None, ca: str | None) -> None:
    """Answers the chosen security protocol would silently drop: refused, naming both."""
    dropped = ([f"--{side}-user"] if user and not security.startswith("SASL") else []) + \
        ([f"--{side}-ca"] if ca and not security.endswith("SSL") else [])
    if dropped:
        raise UsageError(f"{' and '.join(dropped)} given with --{side}-security {security}, which has no use for "
                         f"{'them' if len(dropped) > 1 else 'it'}: nothing was written",
                         fix=f"choose the --{side}-security that uses {'them' if len(dropped) > 1 else 'it'} "
                             "(SASL_SSL for a user and a CA, SASL_PLAINTEXT for a user, SSL for a CA), or leave "
                             f"{'them' if len(dropped) > 1 else 'it'} out")


def _render_checked(answers: Any, target: Path) -> str:
    """The plan's text, validated as a plan (with stand-ins for its password variables) before it is written."""
    import tempfile

    from cutover.errors import PlanError
    from cutover.plan import load_plan
    from cutover.plan.init import render

    text = render(answers)
    with tempfile.TemporaryDirectory() as folder:
        draft = Path(folder) / target.name
        draft.write_text(text.replace("env_file:", "# env_file:"))
        stand_in = f"cutover-init-stand-in-{os.urandom(8).hex()}"  # registered as a secret: never met again
        try:
            load_plan(draft, environ={**os.environ, **{v: stand_in for v in answers.variables()}})
        except PlanError as exc:  # named by the flag that gave the answer, not a line of a file never written
            raise PlanError([_by_flag(p.replace(str(draft), str(target))) + " (nothing was written)"
                             for p in exc.problems]) from None
    return text


#: Plan keys -> the init flag whose answer wrote them (the longest matching key wins).
_FLAGS = {"name": "--name", "topics": "--topics", "groups": "--groups", "tables": "--pair",
          "catalog.uri": "--catalog-uri", "catalog.name": "--catalog-name",
          "catalog.warehouse": "--warehouse", "catalog.storage": "--storage", "catalog": "--catalog-uri",
          "clusters.old": "--old-bootstrap / --old-security", "clusters.new": "--new-bootstrap",
          "clusters.old['bootstrap.servers']": "--old-bootstrap",
          "clusters.new['bootstrap.servers']": "--new-bootstrap",
          "clusters.old['sasl.password']": "--old-password-var", "clusters.new['sasl.password']": "--new-password-var",
          "clusters.old['sasl.username']": "--old-user", "clusters.new['sasl.username']": "--new-user",
          "clusters.old['ssl.ca.location']": "--old-ca", "clusters.new['ssl.ca.location']": "--new-ca",
          "env_file": "--env-file"}


def _by_flag(problem: str) -> str:
    """'FILE:LINE: key.path: what' -> '--flag (key.path in FILE): what'."""
    m = re.match(r"(?P<file>.+?):\d+: (?P<key>[^:\s]+): (?P<what>.*)", problem, re.S)
    if not m:
        return problem
    key = m.group("key")
    best = max((k for k in _FLAGS if key == k or key.startswith((k + ".", k + "[", k + "'"))), key=len, default=None)
    if best is None:
        return problem
    return f"{_FLAGS[best]} (plan key {key}): {m.group('what')}"
