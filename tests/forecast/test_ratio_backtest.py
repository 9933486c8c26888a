"""Cost per 1M tokens in the backtest: the joint error correlation of spend and tokens, and the
out-of-sample coverage of the ratio's intervals."""

from __future__ import annotations

import numpy as np

from forecast.ratio import historical_ratio
from forecast.ratio_backtest import ratio_backtest
from forecast.select import forecast_series
from tests.forecast.synthetic import seasonal


def _fleet(seed: int, together: bool) -> tuple[np.ndarray, np.ndarray]:
    """Tokens/h and spend/h over three weeks; ``together``: the busy hours that beat the token
    forecast also cost more (the load-proportional share of spend)."""
    rng = np.random.default_rng(seed)
    n = 24 * 21
    load = seasonal(n, level=1e6, daily=0.5, noise=0.0, seed=seed)
    surprise = np.exp(rng.normal(0.0, 0.25, n))
    tokens = load * surprise
    own = np.exp(rng.normal(0.0, 0.25, n))
    spend = 20.0 + 30.0 * (tokens / 1e6 if together else load / 1e6 * own)
    return tokens, spend


def test_spend_and_tokens_that_miss_together_have_a_positive_joint_rho() -> None:
    rho = {}
    for together in (True, False):
        tokens, spend = _fleet(1, together)
        ft, fs = forecast_series(tokens, 72), forecast_series(spend, 72)
        rho[together] = ratio_backtest(fs, ft, historical_ratio(spend, tokens), 24, np.random.default_rng(0), 2000).rho
    assert rho[True] > 0.5 and abs(rho[False]) < 0.3, rho


def test_the_ratio_intervals_report_what_they_held_out_of_sample() -> None:
    tokens, spend = _fleet(2, together=True)
    ratio = historical_ratio(spend, tokens)
    ft, fs = forecast_series(tokens, 72), forecast_series(spend, 72)
    bt = ratio_backtest(fs, ft, ratio, 24, np.random.default_rng(0), 2000)
    assert bt.wape is not None and bt.wape < 0.3
    assert set(bt.coverage) == {80, 95}
    assert 0.6 <= bt.coverage[80] <= bt.coverage[95] <= 1.0
    # No paired origins (a series without a backtest): no figures, and rho from the residuals.
    short_t, short_s = forecast_series(tokens[:30], 72), forecast_series(spend[:30], 72)
    empty = ratio_backtest(short_s, short_t, ratio[:30], 24, np.random.default_rng(0), 200)
    assert empty.wape is None and empty.coverage == {}


def test_the_ratio_backtest_scales_errors_with_the_served_floor() -> None:
    """The component bands are rebuilt with the floor each forecast carries, as they were served:
    with the floor taken away the rebuilt bands, and so the reported coverage, change. The floor
    is a tenth of the level here, so the change is a point or none on one fleet, depending on
    the models chosen; on one of four fleets it shows."""
    from dataclasses import replace

    changed = []
    for seed in (3, 4, 5, 6):
        tokens, spend = _fleet(seed, together=True)
        ratio = historical_ratio(spend, tokens)
        ft, fs = forecast_series(tokens, 72), forecast_series(spend, 72)
        assert ft.error_floor > 0 and fs.error_floor > 0
        served = ratio_backtest(fs, ft, ratio, 24, np.random.default_rng(0), 2000)
        floorless = ratio_backtest(replace(fs, error_floor=0.0), replace(ft, error_floor=0.0), ratio, 24,
                                   np.random.default_rng(0), 2000)
        assert served.coverage and floorless.coverage
        changed.append(served.coverage != floorless.coverage or served.rho != floorless.rho)
        if changed[-1]:
            break
    assert any(changed)
