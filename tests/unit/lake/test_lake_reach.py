"""How a catalog client's failure is named: pure classification of pyiceberg's and the
database driver's errors (the live cases run against real servers in test_lake_reach)."""

from __future__ import annotations

import pytest
from pyiceberg import exceptions as ice

from cutover.errors import AccessDenied, UnreachableError, UsageError
from cutover.lake.catalog import catalog_error
from cutover.lake.reach import storage_location
from cutover.plan.model import Catalog

REST = Catalog(uri="https://cat.example.test/api", name="lake", type="rest", warehouse="analytics")
PG = Catalog(uri="postgresql+psycopg2://iceberg:pa55word@127.0.0.1:5432/iceberg", name="lake")


@pytest.mark.parametrize(("cat", "exc", "kind", "words"), [
    (REST, ice.UnauthorizedError("RESTError 401: bad token"), AccessDenied,
     ["catalog lake at https://cat.example.test/api refused the credentials (401)", "token"]),
    (REST, ice.ForbiddenError("RESTError 403: not allowed"), AccessDenied, ["refused access (403)", "grant"]),
    (REST, ice.BadRequestError("RESTError 400: Unable to find warehouse analytics"), UsageError,
     ["has no warehouse 'analytics'", "catalog.warehouse"]),
    (PG, Exception('(psycopg2.OperationalError) connection to server at "127.0.0.1", port 5432 failed: FATAL:  '
                   'password authentication failed for user "iceberg" pa55word'), AccessDenied,
     ["catalog lake at postgresql+psycopg2://iceberg:*****@127.0.0.1:5432/iceberg: the database refused the "
      "login of user iceberg", "pg_hba.conf"]),
    (PG, ConnectionRefusedError("[Errno 111] Connection refused"), UnreachableError,
     ["cannot be used: ConnectionRefusedError", "catalog.uri"]),
], ids=["401", "403", "no-warehouse", "login-refused", "refused"])
def test_a_catalog_failure_is_named_with_its_kind_address_and_fix(
        cat: Catalog, exc: Exception, kind: type, words: list[str]) -> None:
    from cutover import secrets

    secrets.register("pa55word")
    error = catalog_error(cat, exc)
    assert type(error) is kind
    rendered = error.render()
    for word in words:
        assert word in rendered
    assert "pa55word" not in rendered


def test_the_storage_location_is_the_storage_key_then_a_warehouse_location_then_a_table() -> None:
    assert storage_location(Catalog(uri="x", storage="s3://b/w", warehouse="s3://a/")) == "s3://b/w"
    assert storage_location(Catalog(uri="x", warehouse="s3://a/w")) == "s3://a/w"
    assert storage_location(Catalog(uri="x", type="rest", warehouse="analytics")) is None
    assert storage_location(Catalog(uri="x", type="rest"), lambda: ["s3://t/ns/tbl"]) == "s3://t/ns/tbl"
    assert storage_location(Catalog(uri="x", type="rest"), lambda: []) is None


@pytest.mark.parametrize(("kind", "module"), [("sql", "pyiceberg.catalog.sql"), ("rest", "pyiceberg.catalog.rest")])
def test_the_catalog_client_is_imported_before_the_deadline_starts(kind: str, module: str) -> None:
    """A cold import (a second or more on a busy host) must not count against --timeout: the
    probes import the client first, in a fresh interpreter where nothing is loaded yet."""
    import subprocess
    import sys

    code = ("import sys; from cutover.lake.catalog import import_clients; from cutover.plan.model import Catalog; "
            f"assert {module!r} not in sys.modules; "
            f"import_clients(Catalog(uri='x', name='c', type={kind!r}), storage=True); "
            f"print({module!r} in sys.modules, 'pyiceberg.io.pyarrow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["True", "True"]


def test_a_probe_whose_deadline_comes_before_its_timeout_says_it_waited_less() -> None:
    """plan check's lake probes end before the command's backstop: a wait shortened by it says how long it was,
    never the whole --timeout it did not have (and a server that answers in time is unaffected)."""
    import threading
    import time

    from cutover.lake.reach import _within

    hang = threading.Event()
    started = time.monotonic()
    with pytest.raises(UnreachableError) as late:
        _within("catalog c at http://127.0.0.1:1", "http://127.0.0.1:1", 5, hang.wait, until=started + 0.8)
    assert time.monotonic() - started < 2
    assert late.value.message.startswith("catalog c at http://127.0.0.1:1 did not answer within 0.")
    assert late.value.message.endswith("s (what was left of the --timeout of 5s)")
    with pytest.raises(UnreachableError) as whole:
        _within("catalog c", "x", 0.6, hang.wait, until=time.monotonic() + 30)
    assert whole.value.message == "catalog c did not answer within 0.6s"
    assert _within("catalog c", "x", 5, lambda: "answered", until=time.monotonic() + 1) == "answered"
    hang.set()
