"""The table layer: Iceberg tables cutover writes and reads, shared by the shadow, verify and the switch.

Tables are loaded through pyiceberg from the plan's catalog, fresh on every call, so a
commit whose outcome was unknown is seen as it is. Every commit cutover makes is a
compare-and-set (`publish`): rows go to a branch, then one catalog commit moves `main`
to it only if `main` is still where the rows were filtered against, and records the
commit's stamped Kafka positions (`cutover.lake.stamps`) in the table's properties.
The column names of Kafka metadata in cutover's tables live here too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from cutover.errors import CutoverError, UnreachableError
from cutover.lake import catalog as catalog_mod
from cutover.lake import stamps
from cutover.plan import Plan

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("cutover.lake")

#: The Kafka metadata columns of every table cutover writes (after the payload's columns).
META_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kafka_topic", "string"),
    ("kafka_partition", "int"),
    ("kafka_offset", "bigint"),
    ("kafka_timestamp", "timestamp"),
    ("kafka_key", "binary"),
    ("kafka_headers", "array<struct<key:string,value:binary>>"),
)
META_NAMES = tuple(n for n, _ in META_COLUMNS)
#: The columns of a table's dead-letter table (`<table>_dead_letter`).
DEAD_LETTER_COLUMNS: tuple[tuple[str, str], ...] = (
    *META_COLUMNS[:5], ("kafka_value", "binary"), META_COLUMNS[5], ("error", "string"),
    ("dead_lettered_at", "timestamp"),
)


def dead_letter_name(table: str) -> str:
    return f"{table}_dead_letter"


def qualified(plan: Plan, table: str) -> str:
    """namespace.table -> catalog.namespace.table, with each part quoted for Spark SQL."""
    cat = plan.require_catalog(f"table {table}")
    return ".".join(f"`{p}`" for p in [cat.name, *table.split(".")])


class Conflict(CutoverError):
    """Another writer moved the table between reading its offsets and publishing: read again, retry."""

    retryable = True


def head(plan: Plan, table: str, branch: str = "main") -> int | None:
    """The snapshot a branch points at (None if the branch does not exist)."""
    return _ref(load_table(plan, table), branch)


def _ref(tbl: Any, branch: str) -> int | None:
    ref = tbl.metadata.refs.get(branch) if tbl is not None else None
    return ref.snapshot_id if ref is not None else None


def publish(spark: SparkSession, plan: Plan, table: str, tbl: Any, df: Any, props: dict[str, str], base: int,
            branch: str, more: Callable[[Any, int, int], dict[str, str]] | None = None,
            timed: Callable[[str], AbstractContextManager[None]] | None = None) -> None:
    """Append `df` to the table only if its main branch is still at `base` (compare-and-set).

    `tbl` is the pyiceberg table as read with the offsets the rows were filtered against.
    The rows are committed to the run's own branch, set to `base` first; then main is
    fast-forwarded to it in a catalog commit that requires main to be still at `base` and
    also records the stamp in the table's properties (`cutover.kafka.state`, and what
    `more(table, snapshot id, timestamp)` adds). `timed` times the "write" and the "commit". The branch
    head's parent is checked to be `base`, so even a branch dropped and recreated
    meanwhile cannot publish rows filtered against other stamps.
    """
    timed = timed or (lambda _phase: nullcontext())
    with timed("write"):
        write_branch(spark, plan, table, tbl, df, base, branch, props)
    with timed("commit"):
        after, written = _written(plan, table, base, branch)
        recorded = {stamps.K_STATE: stamps.state_property(props, written.snapshot_id, written.timestamp_ms)}
        if more is not None:
            recorded.update(more(after, written.snapshot_id, written.timestamp_ms))
        _fast_forward(after, table, base, written.snapshot_id, recorded)


def write_branch(spark: SparkSession, plan: Plan, table: str, tbl: Any, df: Any, base: int, branch: str,
                 props: dict[str, str] | None = None) -> None:
    """`df` appended to the run's own branch, set to `base` first: the staging side of a compare-and-set.
    `props` go into the snapshot's summary."""
    name = qualified(plan, table)
    at = _ref(tbl, branch)
    if at is None:
        spark.sql(f"ALTER TABLE {name} CREATE BRANCH `{branch}` AS OF VERSION {base}")
    elif at != base:
        spark.sql(f"ALTER TABLE {name} REPLACE BRANCH `{branch}` AS OF VERSION {base}")
    df.writeTo(f"{name}.`branch_{branch}`").options(**{f"snapshot-property.{k}": v for k, v in (props or {}).items()}) \
        .append()


def publish_written(plan: Plan, table: str, base: int, branch: str, props: dict[str, str]) -> None:
    """Main moves from `base` to a new snapshot that adds the data files of the branch's head and carries
    `props` in its summary, and the stamp in the table's properties: one catalog commit that fails unless
    main is still at `base`. For a stamp known only once the rows are written (the shadow's one pass: its
    counts are observed during the write); the branch's snapshot, which carries no stamp, stays off main,
    and the branch moves to main's new head in the same commit (the next batch starts from there)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.table.update.snapshot import ManageSnapshots

    after, written = _written(plan, table, base, branch)
    if _ref(after, "main") != base:
        raise Conflict(f"table {table}: another writer committed since snapshot {base}")
    files = [e.data_file for m in written.manifests(after.io) if m.added_snapshot_id == written.snapshot_id
             for e in m.fetch_manifest_entry(after.io, discard_deleted=True) if e.status == ManifestEntryStatus.ADDED]
    try:
        with after.transaction() as tx:
            with tx.update_snapshot(snapshot_properties=props).fast_append() as append:  # requires main == base
                for data_file in files:
                    append.append_data_file(data_file)
            made = tx.table_metadata.snapshot_by_id(append.snapshot_id)
            assert made is not None
            tx.set_properties({stamps.K_STATE: stamps.state_property(props, made.snapshot_id, made.timestamp_ms)})
            ManageSnapshots(tx).create_branch(made.snapshot_id, branch).commit()  # requires it still at its head
    except CommitFailedException:
        raise Conflict(f"table {table}: another writer committed since snapshot {base}") from None


def _written(plan: Plan, table: str, base: int, branch: str) -> tuple[Any, Any]:
    """The table as loaded now and its branch's head, checked to be a child of `base`."""
    after = load_table(plan, table)
    written_id = _ref(after, branch)
    written = after.snapshot_by_id(written_id) if written_id is not None else None
    if written is None or written.parent_snapshot_id != base:
        raise Conflict(f"table {table}: branch {branch} moved while this batch was written to it")
    return after, written


def _fast_forward(tbl: Any, table: str, base: int, snapshot_id: int, recorded: dict[str, str]) -> None:
    """Move main from `base` to `snapshot_id` and set the `recorded` table properties (the stamp), in one
    catalog commit that fails unless main is still at `base` (the compare-and-set)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update.snapshot import ManageSnapshots

    if _ref(tbl, "main") != base:
        raise Conflict(f"table {table}: another writer committed since snapshot {base}")
    try:
        with tbl.transaction() as tx:
            tx.set_properties(recorded)
            ManageSnapshots(tx).set_current_snapshot(snapshot_id=snapshot_id)  # requires main == base
    except CommitFailedException:
        raise Conflict(f"table {table}: another writer committed since snapshot {base}") from None


def stamp_only(spark: SparkSession, plan: Plan, table: str, props: dict[str, str], branch: str,
               more: Callable[[Any, int, int], dict[str, str]] | None = None) -> int:
    """Commit a snapshot that adds no rows and carries `props` (a hand-over point). Returns its id."""
    _snaps, base, tbl = snapshots(plan, table)
    assert base is not None
    try:
        publish(spark, plan, table, tbl, spark.table(qualified(plan, table)).limit(0), props, base, branch, more)
    finally:
        drop_branch(plan, table, branch)
    after = head(plan, table)
    assert after is not None
    return after


DROP_ATTEMPTS = 5


def drop_branch(plan: Plan, table: str, branch: str) -> None:
    """Drop a branch if it is there (a catalog commit through pyiceberg, not a Spark statement to plan)."""
    _drop_refs(plan, table, lambda tbl: [branch] if _ref(tbl, branch) is not None else [])


def drop_stale_branches(plan: Plan, table: str, idle_ms: int) -> None:
    """Branches of shadow runs that died (cutover_*) whose head is older than `idle_ms`."""
    def stale(tbl: Any) -> list[str]:
        now = max((s.timestamp_ms for s in tbl.snapshots()), default=0)
        return [name for name, ref in tbl.metadata.refs.items() if name.startswith("cutover_")
                and (snap := tbl.snapshot_by_id(ref.snapshot_id)) is not None and now - snap.timestamp_ms > idle_ms]

    for name in _drop_refs(plan, table, stale):
        log.info("table %s: dropped branch %s of a shadow run that stopped", table, name)


def _drop_refs(plan: Plan, table: str, which: Callable[[Any], list[str]]) -> list[str]:
    """The branches `which` names in the table as loaded, dropped in one commit (each still where it was seen).

    Another commit in between (a batch of another table's writer, a compaction) fails ours; the table is loaded
    again and the branches chosen again, a few times, as Spark's own commit retries would."""
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(DROP_ATTEMPTS):
        tbl = load_table(plan, table)
        names = which(tbl) if tbl is not None else []
        if not names:
            return []
        manage = tbl.manage_snapshots()
        for name in names:
            manage = manage.remove_branch(name)
        try:
            manage.commit()
            return names
        except CommitFailedException as exc:
            if attempt == DROP_ATTEMPTS - 1:
                raise Conflict(f"table {table}: branch(es) {', '.join(names)} moved while being dropped "
                               f"{DROP_ATTEMPTS} times ({exc}); run the shadow again to drop them") from None
    return []


_catalogs: dict[tuple[str, str], Any] = {}


def load_table(plan: Plan, table: str) -> Any:
    """The table through pyiceberg, freshly loaded (one catalog client per process)."""
    from pyiceberg.exceptions import NoSuchTableError

    cat = plan.require_catalog(f"table {table}")
    key = (cat.name, cat.uri)
    if key not in _catalogs:
        _catalogs[key] = catalog_mod.load(cat)
    try:
        return _catalogs[key].load_table(table)
    except NoSuchTableError:
        return None
    except Exception as exc:  # the database behind the catalog: locked, gone, refusing
        raise UnreachableError(f"catalog {cat.name} could not load table {table}: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:200]}",
                               fix="check that the catalog database is up and reachable") from None


def purge(plan: Plan, table: str) -> None:
    """Drop the table and delete its files (already gone: nothing to do)."""
    from pyiceberg.exceptions import NoSuchTableError

    cat = plan.require_catalog(f"table {table}")
    if load_table(plan, table) is None:
        return
    try:
        _catalogs[(cat.name, cat.uri)].purge_table(table)
    except NoSuchTableError:
        return
    except Exception as exc:  # the catalog's client raises its own types
        raise catalog_mod.catalog_error(cat, exc) from None


def remove_branch(plan: Plan, table: str, branch: str) -> None:
    """Remove one branch (already gone: nothing to do); its snapshots go with the next expiry."""
    tbl = load_table(plan, table)
    if tbl is not None and branch in tbl.metadata.refs:
        tbl.manage_snapshots().remove_branch(branch).commit()


def in_main(tbl: Any) -> set[int]:
    """The snapshot ids main holds: its head and every ancestor."""
    main = tbl.metadata.refs.get("main")
    out: set[int] = set()
    snap = tbl.snapshot_by_id(main.snapshot_id) if main else None
    while snap is not None and snap.snapshot_id not in out:
        out.add(snap.snapshot_id)
        snap = tbl.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
    return out


def exists(plan: Plan, table: str) -> bool:
    return load_table(plan, table) is not None


def snapshots(plan: Plan, table: str) -> tuple[list[stamps.Snapshot], int | None, Any]:
    """Every snapshot of the table, its current snapshot id, and the pyiceberg table (None if absent)."""
    tbl = load_table(plan, table)
    if tbl is None:
        return [], None, None
    snaps = [stamps.Snapshot(s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms,
                              dict(s.summary.additional_properties) if s.summary else {}) for s in tbl.snapshots()]
    current = tbl.current_snapshot()
    return snaps, current.snapshot_id if current else None, tbl


def table_offsets(plan: Plan, table: str) -> stamps.TableOffsets:
    snaps, current, tbl = snapshots(plan, table)
    return stamps.latest(snaps, current, table, properties_of(tbl))


def properties_of(tbl: Any) -> dict[str, str]:
    return dict(tbl.properties) if tbl is not None else {}


def added_since(plan: Plan, table: str, snapshot_id: int) -> set[str] | None:
    """The data files the snapshots after `snapshot_id` (in the current lineage) added, when every one
    of them only appended: then each live row is either in one of these files or was in the table at
    `snapshot_id`. None when that cannot be told: `snapshot_id` is no longer in the lineage (expired),
    or a later snapshot rewrote files (compaction) or deleted rows."""
    from pyiceberg.manifest import ManifestEntryStatus
    from pyiceberg.table.snapshots import Operation

    tbl = load_table(plan, table)
    if tbl is None:
        return None
    after, sid = [], tbl.metadata.current_snapshot_id
    while sid is not None and sid != snapshot_id:
        snap = tbl.snapshot_by_id(sid)
        if snap is None:
            return None
        after.append(snap)
        sid = snap.parent_snapshot_id
    if sid is None:
        return None
    paths: set[str] = set()
    for snap in after:
        if snap.summary is None or snap.summary.operation != Operation.APPEND:
            return None
        for manifest in snap.manifests(tbl.io):
            if manifest.added_snapshot_id != snap.snapshot_id:
                continue
            paths.update(e.data_file.file_path for e in manifest.fetch_manifest_entry(tbl.io, discard_deleted=True)
                         if e.status == ManifestEntryStatus.ADDED)
    return paths
