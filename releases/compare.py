"""Before and after a release: the windows on both sides of a marker, side by side, with the change
and a confidence interval, so that noise is not sold as a regression.

Each quantity is a PromQL expression evaluated every ``step`` over both windows (the same
expressions the dashboards and rules use). Its per-step values are autocorrelated (a 5 m rate
shares most of its samples with the next step's; load drifts), and tests that assume independent
values call ordinary drift a change. So both statistics work on blocks as long as the data stay
correlated: ``2.5 (1 + r) / (1 - r)`` steps for a lag-1 autocorrelation ``r`` (pooled over both
windows, corrected for its small-sample bias by ``(1 + 3r) / n``), at least ``n ** (1/3)``. On
AR(1) noise with bursts this keeps false alarms near 5 % (measured in tests/releases: 5.75 % at
r = 0.7, 3.75 % on white noise) where fixed ``n ** (1/3)`` blocks gave 9 % and a plain
Mann-Whitney test on the steps far more. The interval is a moving-block bootstrap (2,000 resamples,
the generator passed in) of the relative change of the means; the Mann-Whitney U test compares
the windows' block means. A change counts only when the 95 % interval excludes 0 *and* p < 0.05;
fewer than ``MIN_POINTS`` values on a side is "not measurable", never a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
MIN_POINTS = 5
RESAMPLES = 2000


@dataclass(frozen=True)
class Quantity:
    key: str
    title: str
    unit: str
    higher_is_worse: bool
    expr: Callable[[str, str], str]  # (model matcher text, host matcher text) -> PromQL


def _q99(family: str) -> Callable[[str, str], str]:
    return lambda m, _h: f"histogram_quantile(0.99, sum by (le) (rate({family}_bucket{{{m}}}[5m])))"


QUANTITIES: tuple[Quantity, ...] = (
    Quantity("cost_per_million_tokens", "cost per 1M tokens", "$", True,
             lambda m, _h: (f"avg(infermeter_cost_per_million_tokens_dollars{{scope=\"model\",{m}}})" if m
                            else 'avg(infermeter_cost_per_million_tokens_dollars{scope="fleet"})')),
    Quantity("ttft_p99", "TTFT P99", "s", True, _q99("inference_time_to_first_token_seconds")),
    Quantity("itl_p99", "ITL P99", "s", True, _q99("inference_inter_token_latency_seconds")),
    Quantity("e2e_p99", "end-to-end P99", "s", True, _q99("inference_e2e_request_latency_seconds")),
    Quantity("failure_rate", "failure rate", "ratio", True,
             lambda m, _h: (f'sum(rate(inference_requests_total{{outcome="failure",{m}}}[5m])) / '
                            f"sum(rate(inference_requests_total{{{m}}}[5m]))")),
    Quantity("tokens_per_gpu", "throughput per GPU", "tokens/s", False,
             lambda m, h: f"avg(gpu_generation_tokens_per_second{{{','.join(x for x in (m, h) if x)}}})"),
    Quantity("utilization", "GPU utilization", "ratio", False, lambda _m, h: f"avg(gpu_utilization_ratio{{{h}}})"),
)


@dataclass(frozen=True)
class Change:
    key: str
    title: str
    unit: str
    before: float  # mean over the window (NaN: no data)
    after: float
    n_before: int
    n_after: int
    change: float  # (after - before) / before; NaN when not measurable
    low: float  # 95 % bootstrap interval of the change
    high: float
    p_value: float  # Mann-Whitney U, two-sided
    verdict: str  # "worse" | "better" | "no significant change" | "not measurable: <why>"

    @property
    def significant(self) -> bool:
        return self.verdict in ("worse", "better")

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.__dict__.items()}


def block_length(*windows: F64) -> int:
    """Steps per block: long enough that blocks are roughly independent (see the module doc)."""
    n = min(len(w) for w in windows)
    pairs = [(w[:-1] - w.mean(), w[1:] - w.mean()) for w in windows if len(w) > 2]
    num = sum(float((x * y).sum()) for x, y in pairs)
    den = sum(float((x * x).sum()) for x, _ in pairs)
    r = num / den if den > 0 else 0.0
    r = min(0.95, max(0.0, r + (1 + 3 * r) / n))
    return int(min(max(1, n // 3), max(round(n ** (1 / 3)), math.ceil(2.5 * (1 + r) / (1 - r)))))


def _block_means(values: F64, rng: np.random.Generator, resamples: int, block: int) -> F64:
    n = len(values)
    block = min(block, n)
    blocks = -(-n // block)
    starts = rng.integers(0, n - block + 1, size=(resamples, blocks))
    index = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(resamples, -1)[:, :n]
    return np.asarray(values[index].mean(axis=1), np.float64)


def _chunk_means(values: F64, block: int) -> F64:
    """Means of consecutive, non-overlapping blocks (the last may be shorter)."""
    return np.asarray([values[i:i + block].mean() for i in range(0, len(values), block)], np.float64)


def compare_values(quantity: Quantity, before: F64, after: F64, rng: np.random.Generator,
                   resamples: int = RESAMPLES) -> Change:
    from scipy.stats import mannwhitneyu

    b = np.asarray(before, np.float64)
    a = np.asarray(after, np.float64)
    b, a = b[np.isfinite(b)], a[np.isfinite(a)]
    mean_b = float(b.mean()) if len(b) else math.nan
    mean_a = float(a.mean()) if len(a) else math.nan
    nan = math.nan

    def result(change: float, low: float, high: float, p: float, verdict: str) -> Change:
        return Change(quantity.key, quantity.title, quantity.unit, mean_b, mean_a, len(b), len(a), change, low, high,
                      p, verdict)

    if len(b) < MIN_POINTS or len(a) < MIN_POINTS:
        return result(nan, nan, nan, nan, f"not measurable: {len(b)} values before, {len(a)} after "
                                          f"(at least {MIN_POINTS} each)")
    if abs(mean_b) < 1e-12:
        return result(nan, nan, nan, nan, "not measurable: zero before (no relative change)")
    block = block_length(a, b)
    ratios = _block_means(a, rng, resamples, block) / _block_means(b, rng, resamples, block) - 1
    low, high = (float(x) for x in np.percentile(ratios, [2.5, 97.5]))
    ma, mb = _chunk_means(a, block), _chunk_means(b, block)
    if np.all(ma == ma[0]) and np.all(mb == mb[0]):
        p = 0.0 if ma[0] != mb[0] else 1.0
    else:
        p = float(mannwhitneyu(ma, mb, alternative="two-sided").pvalue)
    change = mean_a / mean_b - 1
    if (low > 0 or high < 0) and p < 0.05:
        verdict = "worse" if (change > 0) == quantity.higher_is_worse else "better"
    else:
        verdict = "no significant change"
    return result(change, low, high, p, verdict)
