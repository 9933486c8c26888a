"""`Forecaster` protocol, statsmodels adapters, baselines, backtests and budget early warning."""
