"""Benchmarks: scripts that print figures against a named peer, not tests. Run each as a module
from the repository root, ``.venv/bin/python -m benchmarks.<name> [--quick]``, or all of them with
``make bench`` (:mod:`benchmarks.run_all`)."""
