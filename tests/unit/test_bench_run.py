"""bench/run's own logic (bench/__main__.py): the median against each goal, which way a goal reads, the
table, the plot, and the peak RSS of a real process tree. The measures themselves run by hand (bench/run)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_main", BENCH / "__main__.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules["bench_main"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_figure_is_the_median_of_its_runs_against_its_goal_read_the_right_way(tmp_path: Path) -> None:
    bench = _bench()
    run = bench.Run
    results = [run("mirror_100", r, {}, 80.0, {"records": 1000, "size": 100}) for r in (0.95, 0.70, 0.91)]
    results += [run("freeze_12x12", r, {}, 0.0, {"topics": 12, "shares": {"drain": 0.5, "wait-quiet": 0.25}})
                for r in (1.05, 1.30, 1.08)]
    results += [run("mirror_mm2_100", 2.4, {}, 81.5, {"records": 1000})]
    rows = {r["key"]: r for r in bench.summarize(results)}
    assert (rows["mirror_100"]["median"], rows["mirror_100"]["met"], rows["mirror_100"]["rss_mb"]) == (0.91, True, 80.0)
    assert (rows["mirror_100"]["low"], rows["mirror_100"]["high"], rows["mirror_100"]["goal"]) == (0.7, 0.95, ">= 0.9")
    assert (rows["freeze_12x12"]["median"], rows["freeze_12x12"]["met"]) == (1.08, True)  # lower is better
    assert rows["mirror_mm2_100"]["met"] and list(rows) == ["freeze_12x12", "mirror_100", "mirror_mm2_100"]
    text = bench.table(list(rows.values()))
    assert "| 0.91x | 0.70x to 0.95x | 3 | >= 0.9x | yes | 80.0 | records 1,000, size 100 |" in text
    assert "freeze_12x12: where the last run's freeze window went: drain 50%, wait-quiet 25%" in text
    bench.plot(list(rows.values()), tmp_path / "ratios.png")
    assert (tmp_path / "ratios.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_peak_rss_counts_the_children_of_a_process() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from rss import PeakRss, tree_rss
    finally:
        sys.path.remove(str(BENCH))
    # 200 MB, touched, held by a grandchild until the test closes its input: no fixed wait on either side
    hold = "import sys; b = bytearray(200 * 2**20); sys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                                                    f"{hold!r}])"], stdin=subprocess.PIPE)
    with PeakRss(child.pid, every=0.05) as peak:
        deadline = time.monotonic() + 30
        while peak.peak < 200 * 2**20 and time.monotonic() < deadline and child.poll() is None:
            peak.wait_sample()
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
    assert peak.mb > 200, peak.mb
    assert tree_rss(os.getpid()) > 0 and tree_rss(child.pid) == 0  # a process that is gone holds nothing


def test_a_goal_not_met_prints_its_profile_what_stands_in_the_way_and_what_was_tried() -> None:
    bench = _bench()
    run = bench.Run
    results = [run("mirror_1024", 0.8, {}, 500.0, {"records": 1000}), run("mirror_100", 0.95, {}, 80.0, {}),
               run("shadow_1kb", 0.65, {}, 900.0, {}), run("verify_diff_5000000", 1.9, {}, 1700.0, {})]
    said = "\n".join(bench.standing(bench.summarize(results)))
    assert "mirror_100" not in said  # met: nothing said
    for key in ("mirror_1024", "shadow_1kb", "verify_diff_5000000"):
        assert f"{key} (" in said and "not met: profile" in said.split(f"{key} (")[1].split("\n")[0]
    assert "Tried:" in said and "In the way:" in said
    goals = {m.key for m in bench.MEASURES if m.goal is not None} | set(bench.EXTRA)
    assert sorted(k for k in goals - set(bench.STANDING) if not k.startswith(("freeze_", "verify_equal_"))) == [
        "mirror_100", "mirror_65536"]  # met in the last whole run; the others have their profile
