"""Runbook-guided drills: the runbook model, the step registry, the runner, the report."""
