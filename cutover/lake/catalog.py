"""One Iceberg catalog, seen the same way by pyiceberg and by Spark.

The plan names the catalog once; this module renders it for each side. Both sides
must use the same catalog name and, for SQL catalogs, the V1 schema of the
`iceberg_tables` table (STACK.md), whichever side creates it first.

Object storage: `catalog.properties` holds pyiceberg's S3 settings (`s3.endpoint`,
`s3.access-key-id`, `s3.secret-access-key`, `s3.path-style-access`, `s3.region`); Spark gets
the same through Iceberg's S3FileIO (`client.region` for the region). With an `s3.endpoint`
(S3-compatible storage, not AWS itself) both SDKs are asked to send and check checksums
only when required, unless AWS_REQUEST_CHECKSUM_CALCULATION / AWS_RESPONSE_CHECKSUM_VALIDATION
are set: newer AWS SDKs add checksums many S3-compatible stores reject.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cutover import secrets
from cutover.errors import AccessDenied, CutoverError, DependencyMissing, UnreachableError, UsageError
from cutover.plan.model import Catalog

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog as IcebergCatalog


#: The AWS SDKs' checksum settings for S3-compatible storage (see the module's docstring):
#: s3proxy 2.6.0, for one, answered the SDKs' default checksums with 400 XAmzContentSHA256Mismatch
#: on a put and 501 on a get (and on a multi-object delete, which requires one).
S3_COMPAT_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
                 "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
#: PostgreSQL's SQL states of a connection its server ended: admin_shutdown, crash_shutdown,
#: cannot_connect_now (starting up); Iceberg's JDBC pool retries these besides its own.
POSTGRES_RETRYABLE = "57P01,57P02,57P03"
#: pyiceberg's S3 property names that Iceberg's Java S3FileIO spells differently.
_SPARK_NAMES = {"s3.region": "client.region"}


def _s3_compatible(cat: Catalog) -> bool:
    return "s3.endpoint" in cat.properties


def prepare_s3(cat: Catalog) -> None:
    """Before any S3 client exists in this process (pyarrow's, or the Spark driver's JVM)."""
    if _s3_compatible(cat):
        for key, value in S3_COMPAT_ENV.items():
            os.environ.setdefault(key, value)
    password = urlsplit(cat.uri).password
    if password:
        secrets.register(password)


def pyiceberg_properties(cat: Catalog) -> dict[str, str]:
    props = {"type": cat.type, "uri": cat.uri, **cat.properties}
    if cat.warehouse:
        props["warehouse"] = cat.warehouse
    if cat.type == "sql":
        props.setdefault("schema_version", "v1")
        props.setdefault("init_catalog_tables", "true")
        # A database that restarted under a long-running command (shadow status --watch, a
        # drill, verify) left dead connections in the pool: test each before lending it.
        props.setdefault("pool_pre_ping", "true")
    return props


#: The client modules pyiceberg imports on first use, by catalog type and by storage scheme.
_CLIENT_MODULES = {"sql": ("pyiceberg.catalog.sql",), "rest": ("pyiceberg.catalog.rest",)}
_IO_MODULES = ("pyiceberg.io.pyarrow",)


def import_clients(cat: Catalog, storage: bool = False) -> None:
    """Import the Python clients the catalog (and its object storage) will need, before a
    deadline starts: a deadline measures the server, not a cold import on a busy host (a
    second or more). A module that cannot be imported is left for load() to name."""
    import contextlib
    import importlib

    for name in (*_CLIENT_MODULES.get(cat.type, ()), *(_IO_MODULES if storage else ())):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def load(cat: Catalog) -> IcebergCatalog:
    """The pyiceberg catalog for a plan's catalog section."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NotInstalledError

    prepare_s3(cat)
    try:
        return load_catalog(cat.name, **pyiceberg_properties(cat))
    except (ModuleNotFoundError, NotInstalledError) as exc:
        # pyiceberg wraps the missing import ("SQLAlchemy support not installed" even when only
        # the database's driver is missing); the import error it wraps names the module.
        missing = getattr(exc, "name", None) or getattr(exc.__cause__, "name", None) or "its driver"
        postgres = urlsplit(cat.uri).scheme.startswith("postgresql")
        raise DependencyMissing(
            f"catalog {cat.name} ({safe_uri(cat.uri)}): the Python module '{missing}' it needs is not installed",
            fix="pip install 'cutover[postgres]'" if postgres else str(exc).splitlines()[0]) from None
    except Exception as exc:  # SQLAlchemy/HTTP errors vary by backend; classified by type and text
        raise catalog_error(cat, exc) from None


#: What PostgreSQL (through psycopg2) says when it refuses a login.
_LOGIN_REFUSED = ("password authentication failed", "no pg_hba.conf entry", "role \"")


def catalog_error(cat: Catalog, exc: Exception) -> CutoverError:
    """An error of the catalog's client as a named error: which catalog, where, and the fix."""
    from pyiceberg import exceptions as ice

    what = f"catalog {cat.name} at {safe_uri(cat.uri)}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {secrets.scrub(first)}"
    if isinstance(exc, ice.UnauthorizedError | ice.OAuthError | ice.AuthorizationExpiredError):
        return AccessDenied(f"{what} refused the credentials (401): {text}",
                            fix="check catalog.properties token / credential (read from ${ENV} in the plan)")
    if isinstance(exc, ice.ForbiddenError):
        return AccessDenied(f"{what} refused access (403): {text}",
                            fix="grant the principal of catalog.properties credential / token access to the "
                            "catalog and its warehouse")
    if cat.type == "rest" and cat.warehouse and isinstance(exc, ice.BadRequestError | ice.RESTError):
        return UsageError(f"{what} has no warehouse {cat.warehouse!r}: {text}",
                          fix="set catalog.warehouse to a warehouse this catalog serves")
    if cat.type == "sql" and any(s in str(exc) for s in _LOGIN_REFUSED):
        user = urlsplit(cat.uri).username or "(none)"
        return AccessDenied(f"{what}: the database refused the login of user {user}: {text}",
                            fix="check the user and password in catalog.uri (the password from ${ENV} in the "
                            "plan's env_file) and the database's pg_hba.conf")
    return UnreachableError(f"{what} cannot be used: {text}",
                            fix="check catalog.uri in the plan and that the catalog server or database is up "
                            "and reachable from this host")


def java_properties(cat: Catalog) -> dict[str, str]:
    """The catalog's properties for Iceberg's Java CatalogUtil (Spark's catalog, the Kafka Connect
    sink's `iceberg.catalog.*`): the same catalog pyiceberg sees."""
    props: dict[str, str] = {}
    if cat.type == "rest":
        props["type"] = "rest"
        props["uri"] = cat.uri
    else:
        props["catalog-impl"] = "org.apache.iceberg.jdbc.JdbcCatalog"
        props["jdbc.schema-version"] = "V1"
        jdbc = _jdbc(cat.uri)
        props.update(jdbc)
        if jdbc["uri"].startswith("jdbc:postgresql:"):
            # A pooled connection the database closed when it stopped or crashed answers the next
            # query with 57P01/57P02 (not among Iceberg's retryable states): reconnect and retry.
            props["retryable_status_codes"] = POSTGRES_RETRYABLE
    if cat.warehouse:
        props["warehouse"] = cat.warehouse
    for key, value in cat.properties.items():
        props.setdefault(_SPARK_NAMES.get(key, key), value)
    if any(key.startswith("s3.") for key in cat.properties):
        props.setdefault("io-impl", S3_FILE_IO)
    # Every reader must see commits made elsewhere at once: offsets are read from the table
    # before each commit (Spark: foreachBatch runs in a clone with its own catalog instance).
    props.setdefault("cache-enabled", "false")
    return props


def spark_conf(cat: Catalog) -> dict[str, str]:
    """spark.sql.catalog.<name>.* settings for the same catalog."""
    prefix = f"spark.sql.catalog.{cat.name}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
    conf.update({f"{prefix}.{k}": v for k, v in java_properties(cat).items()})
    if _s3_compatible(cat):
        prepare_s3(cat)  # the driver: this process's environment, inherited by its JVM
        conf.update({f"spark.executorEnv.{k}": os.environ[k] for k in S3_COMPAT_ENV})
    return conf


def _jdbc(uri: str) -> dict[str, str]:
    """SQLAlchemy URL -> JDBC URL and credentials."""
    parts = urlsplit(uri)
    scheme = parts.scheme.split("+")[0]
    if scheme == "sqlite":
        # SQLAlchemy: sqlite:///relative.db, sqlite:////absolute/path.db
        path = uri.split("://", 1)[1][1:]
        if not path.startswith("/"):
            raise UsageError(f"catalog.uri {uri}: Spark needs an absolute SQLite path",
                             fix="write it as sqlite:////absolute/path/catalog.db")
        return {"uri": f"jdbc:sqlite:{path}"}
    if scheme in ("postgresql", "postgres"):
        out = {"uri": f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"}
        if parts.username:
            out["jdbc.user"] = parts.username
        if parts.password:
            out["jdbc.password"] = parts.password
        return out
    raise UsageError(f"catalog.uri {safe_uri(uri)}: Spark cannot use this database for an Iceberg SQL catalog",
                     fix="use sqlite:////path/catalog.db or postgresql+psycopg2://user@host/db")


def safe_uri(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.password:
        return uri.replace(f":{parts.password}@", ":*****@")
    return uri
