"""The go/no-go gate: reconcile the old and new tables, run quality suites, report."""
