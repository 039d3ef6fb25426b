"""Every action, fault and expectation a runbook can name (see `base` for the registry)."""

from cutover.drill.ops import expect, faults, pipeline, traffic
from cutover.drill.ops.base import OPS, ExpectationFailed, Op

__all__ = ["OPS", "ExpectationFailed", "Op", "expect", "faults", "pipeline", "traffic"]
