"""Readers that keep their own offsets: one module per kind, each turning the mirror's map into its format."""
