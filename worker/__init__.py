"""Reference inference worker and load generator (standalone: imports nothing else of ours)."""
