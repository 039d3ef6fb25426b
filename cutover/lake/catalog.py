"""One Iceberg catalog, seen the same way by pyiceberg and by Spark.

The plan names the catalog once; this module renders it for each side. Both sides
must use the same catalog name and, for SQL catalogs, the V1 schema of the
`iceberg_tables` table (STACK.md), whichever side creates it first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cutover.errors import DependencyMissing, UnreachableError, UsageError
from cutover.plan.model import Catalog

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog as IcebergCatalog


def pyiceberg_properties(cat: Catalog) -> dict[str, str]:
    props = {"type": cat.type, "uri": cat.uri, **cat.properties}
    if cat.warehouse:
        props["warehouse"] = cat.warehouse
    if cat.type == "sql":
        props.setdefault("schema_version", "v1")
        props.setdefault("init_catalog_tables", "true")
    return props


def load(cat: Catalog) -> IcebergCatalog:
    """The pyiceberg catalog for a plan's catalog section."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NotInstalledError

    try:
        return load_catalog(cat.name, **pyiceberg_properties(cat))
    except (ModuleNotFoundError, NotInstalledError) as exc:
        # pyiceberg wraps the missing import ("SQLAlchemy support not installed" even when only
        # the database's driver is missing); the import error it wraps names the module.
        missing = getattr(exc, "name", None) or getattr(exc.__cause__, "name", None) or "its driver"
        postgres = urlsplit(cat.uri).scheme.startswith("postgresql")
        raise DependencyMissing(
            f"catalog {cat.name} ({_safe_uri(cat.uri)}): the Python module '{missing}' it needs is not installed",
            fix="pip install 'cutover[postgres]'" if postgres else str(exc).splitlines()[0]) from None
    except Exception as exc:  # SQLAlchemy/HTTP errors vary by backend; all mean "cannot use it"
        raise UnreachableError(f"catalog {cat.name} ({_safe_uri(cat.uri)}) cannot be opened: "
                               f"{type(exc).__name__}: {str(exc).splitlines()[0]}",
                               fix="check catalog.uri in the plan and that the database is reachable") from None


def spark_conf(cat: Catalog) -> dict[str, str]:
    """spark.sql.catalog.<name>.* settings for the same catalog."""
    prefix = f"spark.sql.catalog.{cat.name}"
    conf = {prefix: "org.apache.iceberg.spark.SparkCatalog"}
    if cat.type == "rest":
        conf[f"{prefix}.type"] = "rest"
        conf[f"{prefix}.uri"] = cat.uri
    else:
        conf[f"{prefix}.catalog-impl"] = "org.apache.iceberg.jdbc.JdbcCatalog"
        conf[f"{prefix}.jdbc.schema-version"] = "V1"
        conf.update({f"{prefix}.{k}": v for k, v in _jdbc(cat.uri).items()})
    if cat.warehouse:
        conf[f"{prefix}.warehouse"] = cat.warehouse
    for key, value in cat.properties.items():
        conf.setdefault(f"{prefix}.{key}", value)
    # Every session (foreachBatch runs in a clone with its own catalog instance) must see
    # commits made elsewhere at once: offsets are read from the table before each commit.
    conf.setdefault(f"{prefix}.cache-enabled", "false")
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
    raise UsageError(f"catalog.uri {_safe_uri(uri)}: Spark cannot use this database for an Iceberg SQL catalog",
                     fix="use sqlite:////path/catalog.db or postgresql+psycopg2://user@host/db")


def _safe_uri(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.password:
        return uri.replace(f":{parts.password}@", ":*****@")
    return uri
