"""Forecasting spend, tokens and cost per 1M tokens, and budget early warning.

Library (pure; numpy in, dataclasses out):

* :mod:`forecast.types`    -- ``Forecaster.fit(y) -> Fitted``, ``Fitted.predict(h, levels) -> Prediction``
* :mod:`forecast.baselines`, :mod:`forecast.ets`, :mod:`forecast.arima` -- the models
* :mod:`forecast.select`   -- ``forecast_series(y, horizon, SelectConfig) -> SeriesForecast``
  (rolling-origin backtest selection, combination, fallbacks, conformal intervals)
* :mod:`forecast.ratio`    -- cost per 1M tokens from the spend and token forecasts
* :mod:`forecast.budget`   -- ``budget_projection(...)``, ``unit_cost_projection(...)``

Service: :mod:`forecast.service` (``HistorySource``, ``ForecastService``), tables in
:mod:`forecast.schema`, :mod:`forecast.api` (``forecast_router``), :mod:`forecast.cli`
(``register``). Nothing is imported here, so ``import forecast.schema`` stays cheap;
statsmodels is imported on first fit.
"""
