"""Prometheus-shaped rule files, evaluator, alert state machine and notification pipeline."""
