"""`cutover demo`: the whole migration on the local sandbox, in one command.

Brings the sandbox up, writes a demo plan (orders and payments topics and tables, a
consumer group, the sample quality suite), and drives runbooks/full-migration.yaml with
--auto: sample traffic with keys, headers and transactions; the old pipeline (by default
Apache Iceberg's Kafka Connect sink, one connector per table on the sandbox's Connect
worker, handed over by promote and rollback; `stand-in`: cutover's own Spark job); mirror,
shadow, verify, promote, traffic on the new cluster, rollback, verify after the round trip,
promote again, verify. Each run uses fresh topic and table names, so it can be run again on
the same sandbox.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Literal, cast

from cutover import shipped
from cutover.common import NETWORK_TIMEOUT
from cutover.drill import model, runner
from cutover.plan import Plan, derive, load_plan

RUNBOOK = model.RUNBOOKS / "full-migration.yaml"
ORDERS = [{"name": "seq", "type": "long", "nullable": False}, {"name": "order_id", "type": "string"},
          {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
          {"name": "currency", "type": "string"}, {"name": "created_at", "type": "long"}]
PAYMENTS = [{"name": "seq", "type": "long", "nullable": False}, {"name": "payment_id", "type": "string"},
            {"name": "order_id", "type": "string"}, {"name": "amount", "type": "double"},
            {"name": "method", "type": "string"}]
#: The old table's Kafka metadata columns as Iceberg's sink writes them (its KafkaMetadataTransform).
SINK_COLUMNS = {"partition": "_kafka_metadata_partition", "offset": "_kafka_metadata_offset",
                "topic": "_kafka_metadata_topic", "timestamp": "_kafka_metadata_timestamp"}
OldPipeline = Literal["sink", "stand-in"]


def demo_plan(sandbox: Any, folder: Path, ns: str, connect_url: str | None = None, value_format: str = "json",
              ) -> Plan:
    """The demo's plan. With `connect_url`, Iceberg's sink connectors at that Connect worker write
    the old tables; without it, the stand-in. `value_format` avro: the values in Avro through the
    sandbox's registries (the columns come from the registered schemas)."""
    base = load_plan(sandbox.plan_file).spec
    offsets = {"partition": "kafka_partition", "offset": "kafka_offset"}

    def payload(schema: list[Any]) -> dict[str, Any]:
        if value_format != "avro":
            return {"schema": schema}
        # Iceberg's sink reads each record with its own writer schema: a field an older version lacks is null
        return {"format": "avro", "missing_fields": "null" if connect_url else "default"}

    def old(table: str) -> dict[str, Any]:
        if connect_url is None:
            return {"old_offset_columns": offsets}
        # the connector's group (connect-sink-...) and control topic are outside the plan's groups
        # and topics selections: the mirror leaves them to the hand-over
        return {"old_offset_columns": SINK_COLUMNS, "writer_offsets": "iceberg-connect",
                "connector": f"sink-{ns}-{table}", "control_topic": f"control-{ns}-{table}",
                "connect_url": connect_url}
    folder.mkdir(parents=True, exist_ok=True)
    suite = shipped.folder("checks") / "orders_basic.json"
    if suite.exists():
        (folder / "checks").mkdir(exist_ok=True)
        shutil.copy(suite, folder / "checks" / suite.name)
    return derive(
        sandbox.plan_file, folder / "plan.yaml", name=ns, routing=None,
        topics={"include": [f"{ns}\\..*"]}, groups={"include": [f"{ns}-.*"]},
        # its own state topics: complete removes them (another plan's share of them would keep them)
        mirror={"replication_factor": base.mirror.replication_factor, "group_sync_interval": "2s",
                "state_prefix": f"__cutover_{ns}"},
        spark={"master": base.spark.master, "conf": base.spark.conf, "trigger_interval": "2s",
               "checkpoint_dir": str(folder / "checkpoints")},
        # verify runs beside live traffic once the mirror trails by at most 500 records (the runbook's
        # "the mirror keeps up"): the new table may be that far behind the old one. The sink goes on
        # writing the old tables after the drill's shadow has caught up and stopped, so there the old
        # tables run further ahead; each verify compares every row up to the new table's positions,
        # and the last one, after the traffic has stopped, every row.
        gates={"quiet_period": "2s", "verify_max_age": "1h",
               "max_lag_rows": {"old_ahead": 500 if connect_url is None else 1_000_000}},
        tables=[
            {"topic": f"{ns}.orders", "old": f"{ns}_legacy.orders", "new": f"{ns}.orders", **payload(ORDERS),
             "partition_by": ["day(kafka_timestamp)"], "checks": ["orders_basic"], **old("orders")},
            {"topic": f"{ns}.payments", "old": f"{ns}_legacy.payments", "new": f"{ns}.payments",
             **payload(PAYMENTS), **old("payments")},
        ])


def run(sandbox_dir: Path | None, rate: int, records: int, catalog: str | None = None,
        timeout: float = NETWORK_TIMEOUT, old_pipeline: OldPipeline = "sink", value_format: str = "json",
        ) -> dict[str, Any]:
    from cutover.local.sandbox import Sandbox
    from cutover.output import progress

    box = Sandbox(sandbox_dir)
    progress("bringing up the local sandbox (two Kafka clusters and an Iceberg catalog"
             + (f" on {catalog}" if catalog and catalog != "sqlite" else "") + ")")
    box.up(catalog=cast(Any, catalog), registry=value_format == "avro")
    kind = box.status()["catalog"]["kind"]
    ns = "demo_" + time.strftime("%Y%m%d%H%M%S")
    folder = box.dir / "demo" / ns
    url = None
    if old_pipeline == "sink":
        progress("starting the Kafka Connect worker with Apache Iceberg's sink (the old pipeline) on the old cluster")
        url = box.start_connect("old")["url"]
    plan = demo_plan(box, folder, ns, url, value_format)
    rb = model.load(RUNBOOK, {"rate": str(rate), "records": str(records), "group": f"{ns}-billing"})
    result = runner.run(rb, plan, runner.Options(auto=True, report_dir=folder / "report", sandbox_dir=box.dir,
                                                       timeout=timeout))
    out = {"catalog": kind, "old_pipeline": old_pipeline, "format": value_format, **summary(result, folder)}
    if out["passed"]:  # the end of the demo's migration: complete (the runbook stops before it, as a rehearsal)
        out.update(_complete(folder, timeout))
    return out


def _complete(folder: Path, timeout: float) -> dict[str, Any]:
    """cutover complete on the plan the drill switched with (its journal and hooks in the report folder)."""
    from cutover.errors import CutoverError
    from cutover.output import progress
    from cutover.plan import load_plan
    from cutover.switch import runner as switch

    progress("completing the migration: cutover complete --execute (a final verify, the mirrors retired, their "
             "state removed, the journal archived)")
    try:
        done = switch.execute(load_plan(folder / "report" / "switch-plan.yaml"), "complete",
                              switch.Options(timeout=timeout))
    except CutoverError as exc:
        return {"passed": False, "completed": False, "complete_error": exc.message}
    return {"completed": done.phase == "completed", "completion_record": done.summary.get("record"),
            "removed": len(done.summary.get("removed") or []), "kept": len(done.summary.get("kept") or [])}


def summary(result: dict[str, Any], folder: Path) -> dict[str, Any]:
    steps = {s["name"]: s for s in result["steps"]}

    def detail(name: str, key: str) -> Any:
        return (steps.get(name) or {}).get("detail", {}).get(key)

    promote = steps.get("switch to the new cluster", {}).get("detail", {})

    def passed(name: str) -> bool:
        return (steps.get(name) or {}).get("outcome") == "passed"

    return {
        "passed": result["passed"],
        "failed_step": result["failed_step"],
        "records": detail("stop the traffic", "produced"),
        "consumed_exactly_once": passed("the consumer read every record exactly once"),
        "verify_passed": detail("the old and new tables agree", "passed"),
        "verify_after_round_trip_passed": passed("the tables agree after the round trip"),
        "promoted_again": passed("switch to the new cluster again"),
        "verify_after_second_promote_passed": passed("the tables agree after the second promote"),
        "freeze_window_seconds": (promote.get("freeze_window") or {}).get("seconds"),
        "carried_back": detail("switch back to the old cluster", "carried_back"),
        "each_cluster_exactly_once": passed("the new cluster holds every record exactly once") and passed(
            "the old cluster holds every record exactly once (the reverse mirror carries them back)"),
        "canonical_table_exactly_once": passed("the canonical table holds every record exactly once"),
        "completed": False,
        "report": str(folder / "report" / "report.html"),
        "plan": str(folder / "plan.yaml"),
    }


def render(s: dict[str, Any]) -> str:
    def yes(v: Any) -> str:
        return "yes" if v else "NO"

    lines = [f"demo {'PASSED' if s['passed'] else 'FAILED'}"
             + (f" (catalog: {s['catalog']}{'' if s['catalog'] == 'sqlite' else ' over S3'})" if s.get("catalog")
                else "")
             + {"sink": "; old pipeline: Iceberg's Kafka Connect sink", "stand-in": "; old pipeline: the stand-in",
                None: ""}[s.get("old_pipeline")]
             + ("; values: Avro with a schema registry per cluster" if s.get("format") == "avro" else "")]
    if s["failed_step"]:
        lines.append(f"  failed at step {s['failed_step']['number']} ({s['failed_step']['name']}): "
                     f"{s['failed_step']['error']}")
    lines += [
        f"  records produced (all four phases):   {s['records'] or 0:,}",
        f"  consumer group moved exactly (3x):    {yes(s['consumed_exactly_once'])}",
        f"  verify before promote passed:         {yes(s['verify_passed'])}",
        "  freeze window at promote:             "
        + (f"{s['freeze_window_seconds']:.1f}s" if s["freeze_window_seconds"] is not None else "-"),
        f"  rollback carried back:                {s['carried_back'] or 0:,} records written on the new cluster",
        f"  verify after the round trip passed:   {yes(s['verify_after_round_trip_passed'])}",
        "  promote again, then verify passed:    "
        + yes(s["promoted_again"] and s["verify_after_second_promote_passed"]),
        f"  each cluster holds each record once:  {yes(s['each_cluster_exactly_once'])}",
        f"  canonical table exactly once:         {yes(s['canonical_table_exactly_once'])}",
        f"  complete (final verify, cleaned up):  {yes(s['completed'])}"
        + (f" ({s['complete_error']})" if s.get("complete_error") else ""),
        f"  report: {s['report']}",
        f"  plan:   {s['plan']}",
    ]
    return "\n".join(lines)
