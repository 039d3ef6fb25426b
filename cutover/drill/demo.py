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
#: The demo onto a platform that writes its own tables (`--platform new=tansu`).
PILOT = model.RUNBOOKS / "platform-table-pilot.yaml"
Columns = list[dict[str, Any]]
ORDERS: Columns = [{"name": "seq", "type": "long", "nullable": False}, {"name": "order_id", "type": "string"},
                   {"name": "customer", "type": "string"}, {"name": "amount", "type": "double"},
                   {"name": "currency", "type": "string"}, {"name": "created_at", "type": "long"}]
PAYMENTS: Columns = [{"name": "seq", "type": "long", "nullable": False}, {"name": "payment_id", "type": "string"},
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


def pilot_plan(sandbox: Any, folder: Path, ns: str) -> Plan:
    """The plan of the demo onto Tansu: the old pipeline's tables (its stand-in, on the old cluster) beside the
    tables Tansu writes itself (tables[].new_writer: tansu), compared by key (`seq`) and content; the mirror in the
    sandbox plan's idempotent mode, its state on the old cluster. Topic names without dots: Tansu names its
    table after the topic, in its namespace."""
    from cutover.local import tansu

    base = load_plan(sandbox.plan_file).spec
    folder.mkdir(parents=True, exist_ok=True)
    offsets = {"partition": "kafka_partition", "offset": "kafka_offset", "timestamp": "kafka_timestamp"}
    pairs = [(f"{ns}_orders", "orders", ORDERS), (f"{ns}_payments", "payments", PAYMENTS)]
    for topic, _name, columns in pairs:  # what Tansu validates each value against and writes as its table
        tansu.write_schema(sandbox.dir / "new", topic, columns)
    return derive(
        sandbox.plan_file, folder / "plan.yaml", name=ns, routing=None,
        topics={"include": [f"{ns}_.*"]}, groups={"include": [f"{ns}-.*"]},
        mirror={"replication_factor": base.mirror.replication_factor, "group_sync_interval": "2s",
                "state_prefix": f"__cutover_{ns}", "mode": base.mirror.mode,
                "state_cluster": base.mirror.state_cluster},
        spark={"master": base.spark.master, "conf": base.spark.conf, "trigger_interval": "2s",
               "checkpoint_dir": str(folder / "checkpoints")},
        gates={"quiet_period": "2s", "verify_max_age": "1h"},
        tables=[{"topic": topic, "old": f"{ns}_legacy.{name}", "new": f"{tansu.NAMESPACE}.{topic}",
                 "new_writer": "tansu", "key": ["seq"], "schema": columns, "old_offset_columns": offsets}
                for topic, name, columns in pairs])


def platform_of(platforms: dict[str, str], old_pipeline: str | None, value_format: str, catalog: str | None) -> str:
    """The new cluster's platform for the demo (`--platform`), refusing what the pilot onto Tansu cannot run."""
    from cutover.errors import UsageError

    if platforms.get("old", "kafka") != "kafka":
        raise UsageError("--platform old=tansu: the demo migrates from Apache Kafka; only the new cluster runs on "
                         "another platform", fix="use --platform new=tansu")
    platform = platforms.get("new", "kafka")
    if platform == "kafka":
        return platform
    refused = [(old_pipeline == "sink", "--old-pipeline sink", "the pilot's old pipeline is the stand-in (Iceberg's "
                "sink would be handed over to Tansu at promote, and it commits through transactions Tansu lacks)"),
               (value_format != "json", f"--format {value_format}", "Tansu's tables are written from JSON values "
                "here (its schemas are files in the sandbox, not a registry)"),
               (catalog not in (None, "rest"), f"--catalog {catalog}", "Tansu writes its tables through a REST "
                "catalog only")]
    for bad, option, why in refused:
        if bad:
            raise UsageError(f"{option} with --platform new=tansu: {why}", fix=f"leave {option.split()[0]} out")
    return platform


def run(sandbox_dir: Path | None, rate: int, records: int, catalog: str | None = None,
        timeout: float = NETWORK_TIMEOUT, old_pipeline: OldPipeline = "sink", value_format: str = "json",
        platform: str = "kafka") -> dict[str, Any]:
    from cutover.local.sandbox import Sandbox
    from cutover.output import progress

    box = Sandbox(sandbox_dir)
    if platform == "tansu":
        return _pilot(box, rate, records, timeout)
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


def _pilot(box: Any, rate: int, records: int, timeout: float) -> dict[str, Any]:
    """The demo onto Tansu: runbooks/platform-table-pilot.yaml on a sandbox whose new cluster is Tansu writing its
    topics into Iceberg tables of the REST catalog."""
    from cutover.output import progress

    progress("bringing up the local sandbox (Apache Kafka as the old cluster, Tansu writing Iceberg tables as the "
             "new one, a REST catalog over S3)")
    box.up(catalog="rest", platforms={"new": "tansu"})
    ns = "demo_" + time.strftime("%Y%m%d%H%M%S")
    folder = box.dir / "demo" / ns
    plan = pilot_plan(box, folder, ns)
    rb = model.load(PILOT, {"rate": str(rate), "records": str(records)})
    result = runner.run(rb, plan, runner.Options(auto=True, report_dir=folder / "report", sandbox_dir=box.dir,
                                                       timeout=timeout))
    return {"catalog": "rest", "old_pipeline": "stand-in", "format": "json", "platform": "tansu",
            **pilot_summary(result, folder)}


#: The pilot's step where the catalog outage stops the mirror (its error is the summary's).
OUTAGE_STOP = "the mirror stops, named (the platform refuses every write while its catalog is away)"


def pilot_summary(result: dict[str, Any], folder: Path) -> dict[str, Any]:
    steps = {s["name"]: s for s in result["steps"]}

    def detail(name: str, key: str) -> Any:
        return (steps.get(name) or {}).get("detail", {}).get(key)

    def passed(name: str) -> bool:
        return (steps.get(name) or {}).get("outcome") == "passed"

    promote = detail("switch to the new cluster (the canonical name to the platform's table)", "freeze_window") or {}
    return {
        "passed": result["passed"],
        "failed_step": result["failed_step"],
        "records": detail("stop the traffic", "produced"),
        "verify_passed": passed("the tables agree"),
        "freshness": detail("the tables agree", "freshness"),
        "catalog_outage": {
            "mirror_stopped_saying": detail(OUTAGE_STOP, "error"),
            "resumed": passed("the mirror goes on from where it stopped") and passed("the mirror keeps up")},
        "replay_passed": passed("the replay agrees with the platform's table"),
        "freeze_window_seconds": promote.get("seconds"),
        "carried_back": detail("switch back to the old cluster (the canonical name to the old table)", "carried_back"),
        "verify_after_round_trip_passed": passed("the tables agree after the round trip"),
        "each_cluster_exactly_once": passed("the new cluster holds every record exactly once") and passed(
            "the old cluster holds every record exactly once (the reverse mirror carries them back)"),
        "old_table_exactly_once": passed("the old pipeline's table holds every record exactly once"),
        "report": str(folder / "report" / "report.html"),
        "plan": str(folder / "plan.yaml"),
    }


def _yes(v: Any) -> str:
    return "yes" if v else "NO"


def _failed(s: dict[str, Any]) -> list[str]:
    """The summary's line naming the step that failed, if one did."""
    f = s["failed_step"]
    return [f"  failed at step {f['number']} ({f['name']}): {f['error']}"] if f else []


def _render_pilot(s: dict[str, Any]) -> str:
    yes = _yes

    def fresh(side: dict[str, Any] | None) -> str:
        if not side or side.get("p50_ms") is None:
            return "-"
        return f"p50 {side['p50_ms'] / 1000:.1f}s, p95 {side['p95_ms'] / 1000:.1f}s"

    lines = [f"demo {'PASSED' if s['passed'] else 'FAILED'} (new cluster: Tansu writing its own Iceberg tables; "
             "old pipeline: the stand-in; catalog: rest over S3)", *_failed(s)]

    def row(label: str, value: str) -> str:
        return f"  {label + ':':44} {value}"

    outage = s["catalog_outage"]
    lines += [row("records produced (three phases)", f"{s['records'] or 0:,}"),
              row("platform's table agrees with the old one", f"{yes(s['verify_passed'])} (by key and content)"),
              row("a replay of the old log agrees with it", yes(s["replay_passed"])),
              row("catalog outage: the mirror stopped, named", yes(outage["mirror_stopped_saying"])),
              row("catalog outage: the mirror resumed", yes(outage["resumed"]))]
    for table, f in sorted((s.get("freshness") or {}).items()):
        lines.append(f"  freshness of {table}: old pipeline {fresh(f.get('old'))}; platform {fresh(f.get('new'))}")
    lines += [
        row("freeze window at promote",
            f"{s['freeze_window_seconds']:.1f}s" if s["freeze_window_seconds"] is not None else "-"),
        row("rollback carried back", f"{s['carried_back'] or 0:,} records written on Tansu"),
        row("tables agree after the round trip", yes(s["verify_after_round_trip_passed"])),
        row("each cluster holds each record once", yes(s["each_cluster_exactly_once"])),
        row("the old pipeline's table exactly once", yes(s["old_table_exactly_once"])),
        f"  report: {s['report']}",
        f"  plan:   {s['plan']}",
    ]
    return "\n".join(lines)


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
    if s.get("platform") == "tansu":
        return _render_pilot(s)
    yes = _yes

    lines = [f"demo {'PASSED' if s['passed'] else 'FAILED'}"
             + (f" (catalog: {s['catalog']}{'' if s['catalog'] == 'sqlite' else ' over S3'})" if s.get("catalog")
                else "")
             + {"sink": "; old pipeline: Iceberg's Kafka Connect sink", "stand-in": "; old pipeline: the stand-in",
                None: ""}[s.get("old_pipeline")]
             + ("; values: Avro with a schema registry per cluster" if s.get("format") == "avro" else ""),
             *_failed(s)]
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
