"""Canonical metrics: raw series of known engines mapped onto one documented set.

vLLM, SGLang, TGI, Triton and dcgm-exporter each name and scale the same quantities their own
way; :func:`to_canonical` computes, from one scraped batch, the additional series of
:data:`CANONICAL` (base units, ``_total`` counters, uniform ``engine``/``model`` labels).  Raw
series stay stored as scraped: the caller appends both batches, so nothing is lost when a
mapping is incomplete or a new engine version renames a family.
"""

from collector.mapping.canonical import CANONICAL, CanonicalMetric, MetricType, sample_names
from collector.mapping.detect import Engine, detect_engine
from collector.mapping.mapper import CanonicalMapper, to_canonical

__all__ = [
    "CANONICAL",
    "CanonicalMapper",
    "CanonicalMetric",
    "Engine",
    "MetricType",
    "detect_engine",
    "sample_names",
    "to_canonical",
]
