"""Table maintenance as a lake team runs it beside cutover: compaction, snapshot expiry and
orphan-file removal, through Iceberg's Spark procedures on the shared catalog.

cutover does not need any of it, and must survive all of it while a shadow commits: a
compaction rewrites the files a stamp's rows live in, an expiry removes the stamped
snapshots themselves (the table's `cutover.kafka.state` property and the running shadow's
own branch keep the positions), and an orphan removal deletes files no snapshot names. The
drills' `table.maintain` step runs this, so a runbook can rehearse it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cutover.errors import UsageError
from cutover.output import progress
from cutover.plan import Plan

T = TypeVar("T")

#: Iceberg's remove_orphan_files procedure refuses a shorter interval.
MIN_ORPHAN_AGE = 86400.0
#: How Iceberg's REST catalog answers a commit that lost a race with another writer's (here: the shadow's)
#: when both took the same sequence number: a 400 "Malformed request" instead of the retryable 409 commit
#: conflict (apache/iceberg#15001), so Iceberg's own commit retry never sees it.
LOST_RACE = "older than last sequence number"
ATTEMPTS = 5

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def maintain(spark: SparkSession, plan: Plan, table: str, orphan_age: float) -> dict[str, Any]:
    """Compact every data file, expire every snapshot but the newest, and remove files no
    snapshot names that are older than `orphan_age` seconds. Counts of what each did.

    `orphan_age` must exceed the longest write in flight (a shadow's batch and its retries,
    spark.commit_timeout): a younger file may belong to a commit not yet published. Iceberg's
    own default is three days, and its procedure refuses less than a day.
    """
    if orphan_age < MIN_ORPHAN_AGE:
        raise UsageError(f"orphan files younger than {orphan_age:.0f}s would be removed from table {table}: "
                         "Iceberg refuses less than a day, because a write in flight may own them",
                         fix="give orphan_age 24h or more (Iceberg's default is 3d)")
    cat, name = plan.require_catalog(f"table {table}").name, table
    now = dt.datetime.now(dt.UTC)

    def call(procedure: str, args: str) -> dict[str, Any]:
        rows = retry_lost_race(lambda: spark.sql(f"CALL `{cat}`.system.{procedure}(table => '{name}', {args})"
                                                 ).collect(), f"{procedure} on {name}")
        return rows[0].asDict() if rows else {}

    def at(moment: dt.datetime) -> str:  # the session's time zone is UTC (cutover.lake.spark)
        return f"TIMESTAMP '{moment:%Y-%m-%d %H:%M:%S.%f}'"

    rewrite = call("rewrite_data_files", "options => map('rewrite-all', 'true')")
    expire = call("expire_snapshots", f"older_than => {at(now)}, retain_last => 1")
    # Listed through the table's own FileIO (S3FileIO on object storage, Hadoop's on local
    # files), not Hadoop's file systems: no s3a client is needed.
    orphans = spark.sql(f"CALL `{cat}`.system.remove_orphan_files(table => '{name}', "
                        f"older_than => {at(now - dt.timedelta(seconds=orphan_age))}, prefix_listing => true)"
                        ).collect()
    return {"table": table,
            "rewritten_data_files": int(rewrite.get("rewritten_data_files_count", 0)),
            "added_data_files": int(rewrite.get("added_data_files_count", 0)),
            "expired_data_files": int(expire.get("deleted_data_files_count", 0)),
            "expired_manifest_lists": int(expire.get("deleted_manifest_lists_count", 0)),
            "orphan_files_removed": [r.orphan_file_location for r in orphans]}


def retry_lost_race(run: Callable[[], T], what: str, attempts: int = ATTEMPTS) -> T:
    """Run a maintenance procedure again when its commit lost a race that the REST catalog reports as a bad
    request (LOST_RACE): the failed commit was not applied and its new files were cleaned up, so running it
    again is what Iceberg's own retry would have done. Any other failure, or the last attempt's, is raised."""
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except Exception as exc:
            if LOST_RACE not in str(exc) or attempt == attempts:
                raise
            progress(f"{what}: its commit lost a race with another writer's (attempt {attempt} of {attempts}); "
                     "running it again")
    raise AssertionError("unreachable")
