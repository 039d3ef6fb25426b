"""`cutover assess`: the readiness scorecard (gather: evidence; score: verdicts; report: text and HTML)."""
