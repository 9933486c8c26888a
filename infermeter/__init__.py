"""infermeter: the composition root (settings, CLI, HTTP API, wiring of every part)."""

import os

# statsmodels fits are small and run one at a time: BLAS thread pools only add contention
# (a 200-series forecast run took 5x longer with them on 2 cores). Must be set before numpy
# loads, hence here, in the package every entry point imports first; an explicit value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
