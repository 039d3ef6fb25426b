"""Data-quality suites (great-expectations Core 1.x) run against both tables of a pair.

A suite is a JSON file `checks/<name>.json`: `{"name": …, "expectations": [{"type":
"expect_…", "kwargs": {…}}]}` (what `ExpectationSuite.to_json_dict()` writes). It is
looked for beside the plan (`<plan dir>/checks/`), then in `./checks/`. The table's
DataFrame is handed to GX at run time through a whole-dataframe batch definition.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutover import shipped
from cutover.errors import UsageError
from cutover.plan import Plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("cutover.verify")


def suite_file(plan: Plan, name: str) -> Path:
    places = [plan.base_dir / "checks" / f"{name}.json", Path.cwd() / "checks" / f"{name}.json"]
    for place in [*places, shipped.folder("checks") / f"{name}.json"]:  # last: the suites cutover ships
        if place.is_file():
            return place
    raise UsageError(f"great-expectations suite {name!r} (tables[].checks) was not found",
                     fix="create one of: " + ", ".join(str(p) for p in places))


def load_suite(plan: Plan, name: str) -> Any:
    import great_expectations as gx

    path = suite_file(plan, name)
    try:
        data = json.loads(path.read_text())
        return gx.ExpectationSuite(name=data.get("name", name), expectations=data["expectations"])
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a great-expectations suite ({type(exc).__name__}: {exc})",
                         fix='write {"name": "...", "expectations": [{"type": "expect_...", "kwargs": {...}}]}') \
            from None


class Runner:
    """One ephemeral GX context for a verify run; progress bars off (stderr stays readable)."""

    def __init__(self) -> None:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        logging.getLogger("great_expectations").setLevel(logging.ERROR)
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        self.source = self.context.data_sources.add_spark(name="cutover")
        self._n = 0

    def run(self, suite: Any, df: DataFrame, table: str, side: str) -> dict[str, Any]:
        self._n += 1
        asset = self.source.add_dataframe_asset(name=f"{side}-{self._n}")
        batch = asset.add_batch_definition_whole_dataframe(f"whole-{self._n}").get_batch(
            batch_parameters={"dataframe": df})
        result = batch.validate(suite)
        return {"suite": suite.name, "table": table, "side": side, "success": bool(result.success),
                "expectations": [{"type": r.expectation_config.type,
                                  "kwargs": {k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"},
                                  "success": bool(r.success),
                                  "unexpected_count": (r.result or {}).get("unexpected_count"),
                                  "element_count": (r.result or {}).get("element_count")}
                                 for r in result.results]}
