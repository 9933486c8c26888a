"""Benchmarks: runnable scripts (``.venv/bin/python benchmarks/<name>.py``), not tests."""
