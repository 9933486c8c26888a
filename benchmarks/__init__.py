"""Benchmarks: scripts that print figures against a named peer, not tests. Run each as a module
from the repository root, ``.venv/bin/python -m benchmarks.<name> [--quick]``, or all of them with
``make bench`` (:mod:`benchmarks.run_all`)."""

import os

# Single-threaded BLAS, as the service runs (infermeter/__init__.py), set here before any
# benchmark loads numpy: a benchmark that measures our code in its own process imported numpy
# before infermeter, and OpenBLAS's worker thread spin-waited after every small product --
# encoding 30,000 chunks took 0.44 s of its thread's CPU and 0.77 s of the process's. The
# forecast's fits were 3-15x slower on a busy machine for the same reason.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
