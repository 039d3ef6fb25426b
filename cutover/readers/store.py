"""Where a reader's files live: a local folder, or a prefix on the plan's object storage.

A Spark query's checkpointLocation is often `s3a://bucket/…` on the same storage as its tables. cutover
reads and adds checkpoint files there with the catalog's S3 settings (`catalog.properties`: `s3.endpoint`,
`s3.access-key-id`, `s3.secret-access-key`, `s3.region`; without them the AWS default chain), through
pyarrow's S3 client, the one pyiceberg uses for the tables.

Creating a file never replaces one. A local folder makes that atomic (a hard link fails when the name
is taken). S3 has no such create for every store (conditional puts are not everywhere): there the name
is checked, the object put, and read back; a query that still runs is caught by the checkpoint's own
checks before that (its newest batch uncommitted) and, racing, by the read-back.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar
from urllib.parse import urlsplit

from cutover.errors import UsageError
from cutover.plan import Plan

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

#: The schemes of a location on S3 (Hadoop's s3a:// is what Spark users write).
S3_SCHEMES = ("s3", "s3a", "s3n")
T = TypeVar("T")


class Folder(Protocol):
    """A folder of small text files, by relative path."""

    def __str__(self) -> str: ...

    def exists(self) -> bool:
        """Whether the folder is there (on S3: whether any object is under it)."""

    def names(self, sub: str) -> list[str]:
        """The names directly in subfolder `sub` (none when it is not there)."""

    def read(self, rel: str) -> str:
        """A file's text (FileNotFoundError when it is not there)."""

    def create(self, rel: str, text: str) -> None:
        """Write a new file whole; FileExistsError when the name is taken (nothing written then)."""

    def child(self, rel: str) -> Folder:
        """A subfolder."""

    def where(self, rel: str) -> str:
        """A file's full name, for messages and the journal."""


@dataclass(frozen=True)
class Local:
    path: Path

    def __str__(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        return self.path.is_dir()

    def names(self, sub: str) -> list[str]:
        where = self.path / sub
        return [f.name for f in where.iterdir()] if where.is_dir() else []

    def read(self, rel: str) -> str:
        return (self.path / rel).read_text(encoding="utf-8")

    def create(self, rel: str, text: str) -> None:
        path = self.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.cutover.tmp")
        tmp.write_text(text, encoding="utf-8")
        try:
            os.link(tmp, path)  # fails if path exists: the other writer won
        finally:
            tmp.unlink()

    def child(self, rel: str) -> Local:
        return Local(self.path / rel)

    def where(self, rel: str) -> str:
        return str(self.path / rel)


@dataclass(frozen=True)
class ObjectStore:
    """A prefix in a bucket: `uri` as the plan spells it (s3a://bucket/prefix), `fs` pyarrow's client."""

    uri: str
    fs: FileSystem
    #: the storage's endpoint, for messages
    endpoint: str

    def __str__(self) -> str:
        return self.uri

    @property
    def _key(self) -> str:
        parts = urlsplit(self.uri)
        return f"{parts.netloc}{parts.path}".rstrip("/")

    def _call(self, doing: str, call: Callable[[], T]) -> T:
        from cutover.lake import reach

        try:
            return call()
        except (FileNotFoundError, FileExistsError):
            raise
        except OSError as exc:
            bucket = urlsplit(self.uri).netloc
            raise reach.storage_error(f"storage {self.endpoint} bucket {bucket} ({doing} {self.uri})", bucket,
                                      exc) from None

    def exists(self) -> bool:
        from pyarrow.fs import FileSelector

        found = self._call("listing", lambda: self.fs.get_file_info(
            FileSelector(self._key, allow_not_found=True, recursive=False)))
        return bool(found)

    def names(self, sub: str) -> list[str]:
        from pyarrow.fs import FileSelector

        found = self._call("listing", lambda: self.fs.get_file_info(
            FileSelector(f"{self._key}/{sub}", allow_not_found=True, recursive=False)))
        return [info.base_name for info in found]

    def read(self, rel: str) -> str:
        def get() -> str:
            with self.fs.open_input_stream(f"{self._key}/{rel}") as src:
                return bytes(src.read()).decode("utf-8")

        return self._call("reading", get)

    def create(self, rel: str, text: str) -> None:
        from pyarrow.fs import FileType

        key = f"{self._key}/{rel}"
        if self._call("reading", lambda: self.fs.get_file_info(key)).type != FileType.NotFound:
            raise FileExistsError(self.where(rel))

        def put() -> None:
            with self.fs.open_output_stream(key) as out:
                out.write(text.encode("utf-8"))

        self._call("writing", put)
        if self.read(rel) != text:  # another writer's object replaced it: theirs stands, ours did not
            raise FileExistsError(self.where(rel))

    def child(self, rel: str) -> ObjectStore:
        return ObjectStore(f"{self.uri.rstrip('/')}/{rel}", self.fs, self.endpoint)

    def where(self, rel: str) -> str:
        return f"{self.uri.rstrip('/')}/{rel}"


def remote(location: str | None) -> bool:
    """Whether a reader's location is on object storage (s3://, s3a://)."""
    return urlsplit((location or "").strip()).scheme in S3_SCHEMES


def local(plan: Plan, location: str | None) -> Path:
    """A folder on this host: absolute (a file:// URI too), or relative to the plan."""
    text = (location or "").strip()
    if text.lower().startswith("file://"):
        text = urlsplit(text).path
    path = Path(text).expanduser()
    return path if path.is_absolute() else plan.base_dir / path


def folder(plan: Plan, location: str | None) -> Folder:
    """A reader's folder: an s3:// or s3a:// URI on the plan's object storage, else a local folder."""
    text = (location or "").strip()
    if remote(text):
        if not urlsplit(text).netloc:
            raise UsageError(f"{text}: no bucket in this location", fix="write it as s3a://BUCKET/PATH")
        return _object_store(plan, text)
    return Local(local(plan, text))


def _object_store(plan: Plan, uri: str, timeout: float = 10.0) -> ObjectStore:
    from pyarrow.fs import S3FileSystem

    from cutover.lake import catalog as catalog_mod

    cat = plan.spec.catalog
    props = dict(cat.properties) if cat is not None else {}
    if cat is not None:
        catalog_mod.import_clients(cat, storage=True)
        catalog_mod.prepare_s3(cat)
    endpoint = props.get("s3.endpoint")
    given = {"endpoint_override": endpoint, "access_key": props.get("s3.access-key-id"),
             "secret_key": props.get("s3.secret-access-key"), "session_token": props.get("s3.session-token"),
             "region": props.get("s3.region") or props.get("client.region")}
    fs = S3FileSystem(connect_timeout=timeout, request_timeout=timeout,
                      **{k: v for k, v in given.items() if v})
    return ObjectStore(uri, fs, endpoint or "AWS S3")
