"""Can the catalog and the warehouse's storage be used? Asked within a deadline, answered by name.

Two components, probed apart so one run says which one is wrong:
- the catalog: opened and asked to list its namespaces (REST: its config, then a list; SQL:
  a login and a query);
- the storage: a small probe object written to the warehouse's location, read back and
  removed (object stores); a local warehouse folder must exist and be writable (never created).

Each failure becomes a CutoverError naming the component, its address (never a secret) and the
fix: `plan check` reports them side by side, and the commands that start Spark call
`preflight` first, so a wrong key is one line before a JVM starts, not a Spark stack trace.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast
from urllib.parse import unquote, urlsplit

from cutover import secrets
from cutover.common import exact
from cutover.errors import AccessDenied, CutoverError, UnreachableError, UsageError
from cutover.lake import catalog as catalog_mod
from cutover.plan.model import Catalog

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog as IcebergCatalog

T = TypeVar("T")

#: Object stores pyiceberg's FileIO reaches over the network.
_OBJECT_SCHEMES = ("s3", "s3a", "s3n", "gs", "abfs", "abfss", "oss")
#: How S3 refusals read: the S3 error codes, and pyarrow's (AWS C++ SDK) spelling of them.
_DENIED = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden", "INVALID_ACCESS_KEY_ID",
           "SIGNATURE_DOES_NOT_MATCH", "ACCESS_DENIED", "HTTP status 403")
_NO_BUCKET = ("NoSuchBucket", "NO_SUCH_BUCKET", "bucket does not exist")


def _within(what: str, address: str, timeout: float, fn: Callable[[], T], until: float | None = None) -> T:
    """fn() in a daemon thread; a component that never answers is reported at the deadline: `timeout` from now,
    or `until` (time.monotonic()) when that comes first, which the error then says.

    The thread is left behind (a client blocked on a silent socket cannot be interrupted from
    outside) and does not hold the process at exit."""
    outcome: dict[str, Any] = {}
    wait = timeout if until is None else max(MIN_WAIT, min(timeout, until - time.monotonic()))

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread as it is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="cutover-reach", daemon=True)
    worker.start()
    worker.join(wait)
    if worker.is_alive():
        within = f"{exact(timeout)}s" if wait >= timeout else \
            f"{exact(round(wait, 1))}s (what was left of the --timeout of {exact(timeout)}s)"
        raise UnreachableError(f"{what} did not answer within {within}",
                               fix=f"check that {address} is the right address and that the server is up and "
                               "reachable from this host (a firewall that drops packets looks like this), or "
                               "raise --timeout")
    if "error" in outcome:
        raise outcome["error"]
    return cast(T, outcome["value"])


#: The least a probe waits when its deadline is near: a server on the same host answers within it.
MIN_WAIT = 0.5


def safe_address(cat: Catalog) -> str:
    return catalog_mod.safe_uri(cat.uri)


def probe_catalog(cat: Catalog, timeout: float, until: float | None = None) -> IcebergCatalog:
    """Open the catalog and list its namespaces; the catalog, or a named error when it cannot be used. Its wait
    ends `timeout` after the client is imported, or at `until` (time.monotonic()) when that comes first."""
    def ask() -> IcebergCatalog:
        iceberg = catalog_mod.load(cat)
        try:
            iceberg.list_namespaces()
        except Exception as exc:  # the backends' errors vary; classified by type and text
            raise catalog_mod.catalog_error(cat, exc) from None
        return iceberg

    catalog_mod.import_clients(cat)
    return _within(f"catalog {cat.name} at {safe_address(cat)}", safe_address(cat), timeout, ask, until)


def storage_location(cat: Catalog, table_locations: Callable[[], list[str]] | None = None) -> str | None:
    """Where the tables' files live: catalog.storage, else the warehouse if it is a location,
    else the first existing table's location (REST catalogs keep the warehouse server-side)."""
    for candidate in (cat.storage, cat.warehouse):
        if candidate and ("://" in candidate or candidate.startswith("/")):
            return candidate
    if table_locations is not None:
        found = table_locations()
        if found:
            return found[0]
    return None


def probe_storage(cat: Catalog, location: str, timeout: float, until: float | None = None) -> str:
    """Write, read back and remove a small object at location; what was done, or a named error (its wait as
    probe_catalog's)."""
    scheme = urlsplit(location).scheme
    if scheme in ("", "file"):
        return _probe_folder(Path(unquote(urlsplit(location).path) if scheme else location))
    if scheme not in _OBJECT_SCHEMES:
        raise UsageError(f"storage {location}: cutover cannot probe the scheme {scheme!r}",
                         fix="use an s3:// warehouse or a local folder")
    endpoint = cat.properties.get("s3.endpoint", f"{scheme}://")
    bucket = urlsplit(location).netloc
    what = f"storage {endpoint} bucket {bucket}"

    def probe() -> str:
        from pyiceberg.io import load_file_io

        props = catalog_mod.pyiceberg_properties(cat)
        props.setdefault("s3.connect-timeout", str(max(1.0, timeout / 2)))
        props.setdefault("s3.request-timeout", str(max(1.0, timeout / 2)))
        catalog_mod.prepare_s3(cat)
        io = load_file_io(props, location)
        path = f"{location.rstrip('/')}/.cutover-probe-{uuid.uuid4().hex}"
        body = b"cutover plan check probe: safe to delete\n"
        try:
            with io.new_output(path).create(overwrite=True) as out:
                out.write(body)
            with io.new_input(path).open() as src:
                if src.read() != body:
                    raise UnreachableError(f"{what}: the probe object read back differs from what was written",
                                           fix="check the storage's health; a proxy or cache may be in the way")
        except CutoverError:
            raise
        except Exception as exc:
            raise storage_error(what, bucket, exc) from None
        try:
            io.delete(path)
        except Exception as exc:
            raise AccessDenied(f"{what}: the probe object {path} was written but cannot be deleted: {exc}",
                               fix="grant delete on the warehouse (compaction and orphan removal need it) and "
                               "remove the probe object") from None
        return f"wrote, read and deleted a probe object under {location}"

    catalog_mod.import_clients(cat, storage=True)
    return _within(what, endpoint, timeout, probe, until)


def storage_error(what: str, bucket: str, exc: Exception) -> CutoverError:
    text = secrets.scrub(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
    if any(s in str(exc) for s in _NO_BUCKET):
        return UsageError(f"{what}: the bucket {bucket!r} does not exist: {text}",
                          fix="create the bucket, or set catalog.warehouse (or catalog.storage) to one that exists")
    if any(s in str(exc) for s in _DENIED):
        return AccessDenied(f"{what}: the storage refused the keys or the access: {text}",
                            fix="check catalog.properties s3.access-key-id / s3.secret-access-key (from ${ENV}) "
                            "and that they may read, write and delete in the bucket")
    return UnreachableError(f"{what} cannot be used: {text}",
                            fix="check catalog.properties s3.endpoint and that the storage is up and reachable "
                            "from this host")


def _probe_folder(folder: Path) -> str:
    if not folder.is_dir():
        raise UsageError(f"storage {folder}: the warehouse folder does not exist",
                         fix="create it, or point catalog.warehouse at the folder that holds the tables")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise AccessDenied(f"storage {folder}: the warehouse folder is not writable by this user",
                           fix=f"give this user write access to {folder}")
    return f"folder {folder} exists and is writable"


def preflight(cat: Catalog, timeout: float) -> None:
    """Both probes, raising the first failure: called before a Spark session is built."""
    probe_catalog(cat, timeout)
    location = storage_location(cat)
    if location is not None:
        probe_storage(cat, location, timeout)
