"""Promote and rollback: steps as data, preconditions, hooks, journal, routing."""
