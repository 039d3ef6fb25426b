"""What a Prometheus says about cutover: its scrape targets whose job is cutover's, and cutover's alert rules
loaded (its HTTP API, /api/v1/targets and /api/v1/rules). Asked by `cutover assess` only."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from cutover.errors import UnreachableError

#: Jobs and rule groups of cutover's own (contrib/prometheus: the scrape config and the rules file name them so).
PREFIX = "cutover"


def _get(url: str, path: str, timeout: float) -> Any:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}{path}", timeout=timeout) as answer:
            doc = json.loads(answer.read())
    except urllib.error.HTTPError as exc:  # a server answered, but not Prometheus's API there
        raise UnreachableError(f"{url} answered {path} with HTTP {exc.code} ({exc.reason}): not Prometheus's HTTP "
                               "API at that URL",
                               fix="set observability.prometheus to Prometheus's root URL (http://host:9090), not "
                               "a page under it or another server") from None
    except ValueError:
        raise UnreachableError(f"{url} answered {path} with something that is not JSON: not Prometheus's HTTP API "
                               "at that URL", fix="set observability.prometheus to Prometheus's root URL "
                               "(http://host:9090)") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UnreachableError(f"Prometheus at {url} did not answer {path}: {reason}",
                               fix="check observability.prometheus in the plan and that Prometheus is up") from None
    if doc.get("status") != "success":
        raise UnreachableError(f"Prometheus at {url} refused {path}: {doc.get('error')}",
                               fix="check observability.prometheus in the plan")
    return doc["data"]


def cutover_targets(url: str, timeout: float) -> dict[str, Any]:
    """Both asked within `timeout` together: a Prometheus that never answers costs one timeout, not two."""
    deadline = time.monotonic() + timeout
    targets = [{"job": t["labels"].get("job"), "url": t.get("scrapeUrl"), "health": t.get("health"),
                "error": t.get("lastError") or None}
               for t in _get(url, "/api/v1/targets?state=active", timeout)["activeTargets"]
               if str(t["labels"].get("job", "")).startswith(PREFIX)]
    left = max(0.5, deadline - time.monotonic())
    rules = [r["name"] for g in _get(url, "/api/v1/rules", left)["groups"] if str(g["name"]).startswith(PREFIX)
             for r in g["rules"]]
    return {"url": url, "targets": targets, "rules": len(rules), "rule_names": rules}
